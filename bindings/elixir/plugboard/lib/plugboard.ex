defmodule Plugboard do
  @moduledoc """
  Runs StableHLO programs on whichever accelerator target the release booted: one release carries
  several PJRT plugins (a *bundle*) and picks one when it starts (`Plugboard.Application`).

      iex> {:ok, client} = Plugboard.client()
      iex> program = """
      ...> func.func @main(%x: tensor<2xf32>, %y: tensor<2xf32>) -> tensor<2xf32> {
      ...>   %0 = stablehlo.add %x, %y : tensor<2xf32>
      ...>   return %0 : tensor<2xf32>
      ...> }
      ...> """
      iex> {:ok, exe} = Plugboard.compile(client, program)
      iex> {:ok, x} = Plugboard.buffer(client, <<1.0::float-32-little, 2.0::float-32-little>>, :f32, {2})
      iex> {:ok, [y]} = Plugboard.run(exe, [x, x])
      iex> {:ok, bytes} = Plugboard.to_binary(y)
      iex> for <<v::float-32-little <- bytes>>, do: v
      [2.0, 4.0]

  (`program` is usually a file: `Plugboard.compile(client, {:file, "model.mlir"})`. The examples on
  these pages run as doctests on a CPU plugin.)

  Nothing here holds a normal BEAM scheduler for more than a millisecond: compilation, executions
  that may run long (the plugin may run a program inside its launch call), large copies and a
  client's teardown run on plugboard's threads or on dirty schedulers and answer by message;
  `compile/3`, `run/3` and `to_binary/2` wait for that message in a `receive`. Waiting is never
  shared: an execution held up in a host callback holds a thread of its own, never one that a
  compilation or another execution needs. A caller that gives up (`timeout:`) cancels what it waited
  for: no message for it arrives later, and its pending host calls fail.

  Native objects (clients, executables, buffers) are owned by the garbage collector; `free/1` lets go
  of a buffer's device memory now. Every function returns `{:ok, value}` or
  `{:error, %Plugboard.Error{}}` (every option is checked, and a bad one named); the bang variants
  raise the error. A cache keyed on a client keys on `client_id/1` and evicts on the message of
  `notify_when_dropped/3`: it never keeps the client alive.

  Device memory crosses to and from other libraries by address, without a copy: `device_pointer/1`
  (a buffer's address) and `buffer_from_pointer/5` (a view of memory someone else owns and keeps
  alive; never donatable).

  Host callbacks: a program's blocking custom calls (`stablehlo.custom_call @name` with results) go to
  an Elixir function run by the process waiting in `run/3` (or to a handler process), its ordered
  calls (`plugboard.print`, and names bound as ordered) to a process or to `Logger`, in program order.
  Routing is per execution: many processes may run one executable at once, each getting its own calls.
  """

  alias Plugboard.{Error, Native}

  @typedoc "Element types, by plugboard's names."
  @type dtype ::
          :bool | :i8 | :i16 | :i32 | :i64 | :u8 | :u16 | :u32 | :u64 | :f16 | :bf16 | :f32 | :f64 | :c64 | :c128
          | :f8e5m2 | :f8e4m3fn
  @type result(t) :: {:ok, t} | {:error, Error.t()}

  @doc "The version of the native library."
  @spec version() :: String.t()
  def version, do: Native.version()

  # The calls, each one concern's module (their pages say the rest).

  # Clients: choosing a target, starting and opening clients.
  defdelegate client(), to: Plugboard.Clients
  defdelegate client!(), to: Plugboard.Clients
  defdelegate report(), to: Plugboard.Clients
  defdelegate boot(opts \\ []), to: Plugboard.Clients
  defdelegate discover(opts \\ []), to: Plugboard.Clients
  defdelegate open(plugin, create_options \\ [], opts \\ []), to: Plugboard.Clients
  defdelegate devices(client), to: Plugboard.Clients
  defdelegate close(client), to: Plugboard.Clients
  defdelegate client_id(client), to: Plugboard.Clients
  defdelegate declare_lapack(client), to: Plugboard.Clients
  defdelegate notify_when_dropped(client, pid, message), to: Plugboard.Clients
  defdelegate native_objects(), to: Plugboard.Clients

  @doc "What every node of the cluster booted and runs: `Plugboard.Cluster.report/1`."
  @spec cluster_report(timeout()) :: [map()]
  defdelegate cluster_report(timeout \\ 2_000), to: Plugboard.Cluster, as: :report

  # Compilation.
  defdelegate compile(client, program, opts \\ []), to: Plugboard.Compilation
  defdelegate compile!(client, program, opts \\ []), to: Plugboard.Compilation

  # Buffers.
  defdelegate buffer(client, data, dtype, shape, opts \\ []), to: Plugboard.Buffers
  defdelegate buffer!(client, data, dtype, shape, opts \\ []), to: Plugboard.Buffers
  defdelegate to_binary(buffer, timeout \\ :infinity), to: Plugboard.Buffers
  defdelegate to_binary!(buffer, timeout \\ :infinity), to: Plugboard.Buffers
  defdelegate to_host(buffer, timeout \\ :infinity), to: Plugboard.Buffers
  defdelegate valid?(buffer), to: Plugboard.Buffers
  defdelegate donatable?(buffer), to: Plugboard.Buffers
  defdelegate free(buffer), to: Plugboard.Buffers
  defdelegate device_pointer(buffer), to: Plugboard.Buffers
  defdelegate buffer_from_pointer(client, address, dtype, shape, opts \\ []), to: Plugboard.Buffers

  # Executions.
  defdelegate run(exe, args, opts \\ []), to: Plugboard.Execution
  defdelegate run!(exe, args, opts \\ []), to: Plugboard.Execution
  defdelegate run_partitioned(exe, args_per_device, opts \\ []), to: Plugboard.Execution
  defdelegate run_partitioned!(exe, args_per_device, opts \\ []), to: Plugboard.Execution
  defdelegate run_async(exe, args, opts \\ []), to: Plugboard.Execution
  defdelegate await(run, timeout \\ :infinity), to: Plugboard.Execution

  # Host calls answered by a handler process.
  defdelegate reply(call, results), to: Plugboard.HostCalls
  defdelegate fail(call, message), to: Plugboard.HostCalls
end
