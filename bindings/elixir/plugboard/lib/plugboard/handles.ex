defmodule Plugboard.Client do
  @moduledoc """
  A started plugin: its devices, buffers and compilation. Owned by the garbage collector (the
  plugin itself stays loaded for the life of the VM). Safe to use from any number of processes.
  `target` is the name of the target `Plugboard.boot/1` started it as, or the plugin's path for a
  client from `Plugboard.open/2` (what telemetry events name it by). `id` is `Plugboard.client_id/1`'s
  answer, read once when the client is opened.
  """
  @type t :: %__MODULE__{resource: reference(), platform: String.t(), platform_version: String.t(), plugin: String.t(),
                         target: String.t(), id: non_neg_integer()}
  @enforce_keys [:resource]
  defstruct [:resource, :platform, :platform_version, :plugin, :target, :id]

  @doc false
  def wrap(resource, target \\ nil) do
    case Plugboard.Native.client_info(resource) do
      {:ok, info} ->
        {:ok,
         %__MODULE__{resource: resource, platform: info.platform, platform_version: info.platform_version, plugin: info.plugin,
                     target: target || info.plugin, id: Plugboard.Native.client_id(resource)}}

      {:error, _} = error ->
        error
    end
  end
end

defmodule Plugboard.Executable do
  @moduledoc """
  A compiled program. `parameters` and `results` are `{dtype, shape}` (parameters nil when the plugin
  cannot tell); `callbacks` names the host callbacks the program calls. `source` says where the
  executable came from: `:compiled` (the plugin compiled it, in `compile_ms`), `:compile_cache` (the
  persistent compile cache) or `:precompiled` (the release's bundle, `precompile:`), loaded in
  `compile_ms`; `notes` names cache entries refused on the way. `launch` says where its executions
  start: `:inline` on the calling scheduler (nothing in the program says it could run long: no loops,
  custom calls, host callbacks, collectives or SPMD partitioning, small results; two launches in a
  row over 0.5 ms, or one over 20 ms, send later ones to a thread until 16 in a row there stay within
  0.5 ms, a count that doubles with each return: the guide "One release, N accelerator
  targets"),
  or `:thread` on one of plugboard's threads. `devices` lists the device indices it was compiled
  for, partition by partition (one; several for `partitions:`, run with `Plugboard.run_partitioned/3`;
  none for a portable program). `target` is its client's (`Plugboard.Client`). Safe to run from any
  number of processes at once.
  """
  @type array_type :: {Plugboard.dtype(), tuple()}
  @type t :: %__MODULE__{
          resource: reference(),
          name: String.t(),
          parameters: [array_type()] | nil,
          results: [array_type()],
          callbacks: [String.t()],
          source: :compiled | :compile_cache | :precompiled,
          compile_ms: float(),
          notes: [String.t()],
          launch: :inline | :thread,
          devices: [non_neg_integer()],
          target: String.t()
        }
  defstruct [:resource, :name, :parameters, :results, :callbacks, :source, :compile_ms, :launch, :target, notes: [], devices: []]
end

defmodule Plugboard.Buffer do
  @moduledoc """
  An array on a device. Owned by the garbage collector: the device memory is released once no
  process holds the term. A buffer donated to an execution is gone afterwards. A buffer made by
  `Plugboard.buffer_from_pointer/5` is a view: it owns no memory, and its term's end releases none.
  """
  @type t :: %__MODULE__{resource: reference(), dtype: Plugboard.dtype(), shape: tuple(), device: non_neg_integer()}
  defstruct [:resource, :dtype, :shape, :device]
end

defmodule Plugboard.HostTensor do
  @moduledoc """
  An array in host memory: row-major, little-endian element bytes (bf16 and f8 as raw bit patterns),
  with its dtype and shape. What host callbacks receive and may return.
  """
  import Bitwise, only: [<<<: 2, >>>: 2, &&&: 2]
  @type t :: %__MODULE__{data: binary(), dtype: Plugboard.dtype(), shape: tuple()}
  defstruct [:data, :dtype, :shape]

  @doc "The elements as numbers (booleans for :bool, `{re, im}` for complex, atoms for NaN/infinities)."
  @spec to_list(t()) :: list()
  def to_list(%__MODULE__{data: data, dtype: dtype}), do: decode(dtype, data, [])

  defp decode(_, <<>>, acc), do: Enum.reverse(acc)
  defp decode(:bool, <<v::8, rest::binary>>, acc), do: decode(:bool, rest, [v != 0 | acc])
  defp decode(:i8, <<v::signed-8, rest::binary>>, acc), do: decode(:i8, rest, [v | acc])
  defp decode(:i16, <<v::signed-little-16, rest::binary>>, acc), do: decode(:i16, rest, [v | acc])
  defp decode(:i32, <<v::signed-little-32, rest::binary>>, acc), do: decode(:i32, rest, [v | acc])
  defp decode(:i64, <<v::signed-little-64, rest::binary>>, acc), do: decode(:i64, rest, [v | acc])
  defp decode(:u8, <<v::8, rest::binary>>, acc), do: decode(:u8, rest, [v | acc])
  defp decode(:u16, <<v::little-16, rest::binary>>, acc), do: decode(:u16, rest, [v | acc])
  defp decode(:u32, <<v::little-32, rest::binary>>, acc), do: decode(:u32, rest, [v | acc])
  defp decode(:u64, <<v::little-64, rest::binary>>, acc), do: decode(:u64, rest, [v | acc])
  defp decode(:f16, <<v::binary-2, rest::binary>>, acc), do: decode(:f16, rest, [f16(v) | acc])
  defp decode(:f32, <<v::binary-4, rest::binary>>, acc), do: decode(:f32, rest, [f32(v) | acc])
  defp decode(:f64, <<v::binary-8, rest::binary>>, acc), do: decode(:f64, rest, [f64(v) | acc])
  defp decode(:bf16, <<v::binary-2, rest::binary>>, acc), do: decode(:bf16, rest, [f32(<<0::16, v::binary>>) | acc])
  defp decode(:c64, <<re::binary-4, im::binary-4, rest::binary>>, acc), do: decode(:c64, rest, [{f32(re), f32(im)} | acc])
  defp decode(:c128, <<re::binary-8, im::binary-8, rest::binary>>, acc), do: decode(:c128, rest, [{f64(re), f64(im)} | acc])
  # f8 elements stay raw bit patterns (integers).
  defp decode(f8, <<v::8, rest::binary>>, acc) when f8 in [:f8e5m2, :f8e4m3fn], do: decode(f8, rest, [v | acc])

  defp f16(<<v::float-little-16>>), do: v
  defp f16(<<u::little-16>>), do: special(u, 16, 10)
  defp f32(<<v::float-little-32>>), do: v
  defp f32(<<u::little-32>>), do: special(u, 32, 23)
  defp f64(<<v::float-little-64>>), do: v
  defp f64(<<u::little-64>>), do: special(u, 64, 52)

  # NaN and the infinities do not match a float pattern.
  defp special(u, bits, mantissa_bits) do
    cond do
      (u &&& (1 <<< mantissa_bits) - 1) != 0 -> :nan
      u >>> (bits - 1) == 1 -> :neg_infinity
      true -> :infinity
    end
  end
end

defmodule Plugboard.Call do
  @moduledoc """
  A blocking host call, sent to the process that handles it as `{:plugboard_call, ref, call}`:
  answer it with `Plugboard.reply/2` (results of the types in `results`, `{dtype, shape}` each) or
  `Plugboard.fail/2`. The running program waits for the answer.
  """
  @type t :: %__MODULE__{
          resource: reference(),
          name: String.t(),
          operands: [Plugboard.HostTensor.t()],
          results: [{Plugboard.dtype(), tuple()}],
          attributes: %{String.t() => term()}
        }
  defstruct [:resource, :name, :operands, :results, :attributes]
end

defmodule Plugboard.OrderedCall do
  @moduledoc """
  An ordered host call (the print hook `plugboard.print`, and any callback bound as ordered): sent
  as `{:plugboard_ordered, ref, call}`, one at a time in program order; the program does not wait.
  `execution` numbers the executions of one receiver from 1, `sequence` the calls within one from 0.
  """
  @type t :: %__MODULE__{
          name: String.t(),
          execution: pos_integer(),
          sequence: non_neg_integer(),
          operands: [Plugboard.HostTensor.t()],
          attributes: %{String.t() => term()}
        }
  defstruct [:name, :execution, :sequence, :operands, :attributes]
end

defmodule Plugboard.Run do
  @moduledoc """
  An execution in flight, from `Plugboard.run_async/3`; `Plugboard.await/2` waits for it (and runs
  its host callbacks that are Elixir functions, in the process that started it).
  """
  @type t :: %__MODULE__{ref: reference(), gate: reference() | nil, blocking: map(), ordered: map(), executable: String.t(), done: term(),
                         telemetry: map() | nil, trace: integer() | nil}
  # `telemetry`: what the run's stop event needs (Plugboard.Telemetry.run_start/3), nil when events are off.
  # `trace`: when a trace is being recorded, the run's start (Plugboard.Trace.now/0 time), else nil.
  defstruct [:ref, :gate, :blocking, :ordered, :executable, :done, :telemetry, :trace]
end
