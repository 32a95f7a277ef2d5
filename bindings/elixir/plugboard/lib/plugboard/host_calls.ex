defmodule Plugboard.HostCalls do
  @moduledoc """
  Answering a running program's host calls from Elixir. A blocking call (`stablehlo.custom_call
  @name` with results) bound in `Plugboard.run/3`'s `callbacks:` to a process reaches it as
  `{:plugboard_call, ref, %Plugboard.Call{}}`; that process answers with `reply/2` or `fail/2`. Calls
  bound to functions are answered by the process waiting for the run (`Plugboard.Execution`), and
  ordered calls delivered there, in program order.
  """
  alias Plugboard.{Call, Error, Executable, HostTensor, Native, Options, OrderedCall, Telemetry}

  # The routes of the program's host callbacks, and the functions this process runs for them.
  @doc false
  def bindings(%Executable{callbacks: []}, opts) do
    # Checked even when the program calls nothing: a malformed binding is the caller's mistake.
    with {:ok, _} <- blocking_bindings(opts), {:ok, _} <- ordered_bindings(opts), do: {:ok, [], %{}, %{}}
  end

  def bindings(exe, opts) do
    with {:ok, blocking} <- blocking_bindings(opts),
         {:ok, ordered} <- ordered_bindings(opts),
         ordered = Map.put_new(ordered, "plugboard.print", :logger),
         {:ok, routes} <- routes(exe, blocking, ordered) do
      functions = fn map -> for {k, f} <- map, is_function(f), into: %{}, do: {k, f} end
      {:ok, routes, functions.(blocking), functions.(ordered)}
    end
  end

  defp blocking_bindings(opts),
    do: Options.bindings(opts, :callbacks, &(is_function(&1, 1) or is_function(&1, 2) or is_pid(&1) or registered_name?(&1)),
                         "a function of arity 1 or 2, a pid or a registered process name")

  defp ordered_bindings(opts),
    do: Options.bindings(opts, :ordered, &(is_function(&1, 1) or is_pid(&1) or registered_name?(&1)),
                         "a function of arity 1, a pid, a registered process name or :logger")

  defp registered_name?(name), do: is_atom(name) and name not in [nil, true, false]

  # One route per host callback the program calls that is bound here: {name, pid, ordered?}.
  defp routes(%Executable{callbacks: needed}, blocking, ordered) do
    Enum.reduce_while(needed, {:ok, []}, fn name, {:ok, acc} ->
      route =
        cond do
          Map.has_key?(blocking, name) -> {name, target(blocking[name]), false}
          Map.has_key?(ordered, name) -> {name, target(ordered[name]), true}
          true -> nil
        end

      case route do
        nil -> {:cont, {:ok, acc}}
        {_, nil, _} -> {:halt, {:error, Error.new(:unavailable, "the process for host callback #{name} is not running")}}
        {_, pid, _} = r when is_pid(pid) -> {:cont, {:ok, [r | acc]}}
      end
    end)
  end

  defp target(fun) when is_function(fun), do: self()
  defp target(pid) when is_pid(pid), do: pid
  defp target(:logger), do: Process.whereis(Plugboard.Printer)
  defp target(name) when is_atom(name), do: Process.whereis(name)

  @doc false
  def answer(%Call{} = call, fun, executable) when is_function(fun) do
    result =
      try do
        Telemetry.span([:plugboard, :host_callback], %{name: call.name, ordered: false, executable: executable}, fn ->
          results =
            Plugboard.Trace.span("host_callback", "elixir", %{target: call.name, executable: executable}, fn ->
              if is_function(fun, 2), do: fun.(call.operands, call.attributes), else: fun.(call.operands)
            end)

          {results, %{name: call.name, ordered: false, executable: executable, result: if(match?({:error, _}, results), do: :error, else: :ok)}}
        end)
      rescue
        e -> {:raised, Exception.format(:error, e, __STACKTRACE__)}
      catch
        kind, value -> {:raised, Exception.format(kind, value, __STACKTRACE__)}
      end

    case result do
      {:raised, text} -> fail(call, "raised " <> text)
      {:error, message} when is_binary(message) -> fail(call, message)
      {:error, reason} -> fail(call, inspect(reason))
      results -> reply(call, results)
    end
  end

  @doc false
  def deliver_ordered(%OrderedCall{} = call, fun, executable) when is_function(fun, 1) do
    metadata = %{name: call.name, ordered: true, executable: executable}

    try do
      Telemetry.span([:plugboard, :host_callback], metadata, fn ->
        Plugboard.Trace.span("ordered_host_callback", "elixir", %{target: call.name, executable: executable, sequence: call.sequence}, fn -> fun.(call) end)
        {:ok, Map.put(metadata, :result, :ok)}
      end)
      nil
    rescue
      e -> Error.new(:unknown, "ordered host callback #{call.name} raised #{Exception.message(e)}")
    catch
      kind, value -> Error.new(:unknown, "ordered host callback #{call.name} failed: #{Exception.format_banner(kind, value)}")
    end
  end

  @doc """
  Answers a blocking host call with its results: a list with one binary or `Plugboard.HostTensor`
  per result (or a single one), of the types in `call.results`. An answer that does not fit fails the
  call (and so the execution) with the same error it returns.
  """
  @spec reply(Call.t(), [binary() | HostTensor.t()] | binary() | HostTensor.t()) :: :ok | {:error, Error.t()}
  def reply(%Call{resource: r}, results), do: Native.reply(r, List.wrap(results))

  @doc "Fails a blocking host call: the execution fails with `message`."
  @spec fail(Call.t(), String.t()) :: :ok | {:error, Error.t()}
  def fail(%Call{resource: r}, message) when is_binary(message), do: Native.fail_call(r, message)
  def fail(%Call{} = call, reason), do: fail(call, inspect(reason))
end
