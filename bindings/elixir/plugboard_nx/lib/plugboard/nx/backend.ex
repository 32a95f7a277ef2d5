defmodule Plugboard.Nx.Backend do
  @moduledoc """
  An Nx backend whose tensors live in plugboard buffers on the booted target:

      iex> t = Nx.tensor([1, 2, 3], backend: Plugboard.Nx.Backend)
      iex> sum = t |> Nx.multiply(2) |> Nx.sum()
      iex> Nx.to_number(sum)
      12
      iex> sum.data.__struct__
      Plugboard.Nx.Backend

  (`Nx.default_backend(Plugboard.Nx.Backend)` makes it the process's default.)

  Each eager operation runs a small program, compiled once per operation, types and shapes by
  `Plugboard.Nx` and cached (slice and put_slice starts are operands: one program serves every
  start). `backend_transfer`/`backend_copy`/`to_binary`/`inspect` read the buffer.
  Options: `client:` (a `%Plugboard.Client{}` or a configured name, as `Plugboard.Nx`'s; default:
  the booted client, `Plugboard.client/0`), `device_id:` (default 0; an operation runs on the device
  of its first operand).
  """
  @behaviour Nx.Backend
  alias Nx.Tensor, as: T

  defstruct [:buffer, :client]

  @dtypes %{
    {:s, 8} => :i8, {:s, 16} => :i16, {:s, 32} => :i32, {:s, 64} => :i64,
    {:u, 8} => :u8, {:u, 16} => :u16, {:u, 32} => :u32, {:u, 64} => :u64,
    {:f, 16} => :f16, {:bf, 16} => :bf16, {:f, 32} => :f32, {:f, 64} => :f64,
    {:c, 64} => :c64, {:c, 128} => :c128, {:f, 8} => :f8e5m2, {:f8_e4m3fn, 8} => :f8e4m3fn
  }

  @doc false
  # Nx's sub-byte integers (s2, s4, u2, u4) have no plugboard dtype.
  def dtype(type) do
    case @dtypes do
      %{^type => dtype} -> dtype
      %{} -> raise ArgumentError, "Plugboard.Nx has no buffers of type #{Nx.Type.to_string(type)} (plugboard's dtypes: #{Enum.map_join(Map.values(@dtypes), ", ", &Atom.to_string/1)})"
    end
  end

  @doc false
  # Before compiling: each of `labelled_tensors` ({tensor, what it is to the caller, e.g. "the 2nd
  # argument" or "result 0"}: a program's arguments or results) has a plugboard dtype, else an
  # ArgumentError naming the first that has not and its type.
  def check_types!(labelled_tensors) do
    Enum.each(labelled_tensors, fn {%T{type: type}, label} ->
      unless Map.has_key?(@dtypes, type) do
        raise ArgumentError,
              "Plugboard.Nx: #{label} has type #{Nx.Type.to_string(type)}, which plugboard's buffers do not have " <>
                "(sub-byte integers: convert with Nx.as_type/2, to s8 or u8 for example)"
      end
    end)
  end

  @doc false
  # A tensor as a buffer of `client` on `device`: its own when it already lives there, else a copy of
  # its bytes.
  def to_buffer(client, t, device \\ 0)

  def to_buffer(client, %T{data: %__MODULE__{buffer: %{device: device} = buffer, client: %{resource: r}}}, device)
      when r == client.resource,
      do: buffer

  def to_buffer(client, %T{} = t, device) do
    t = Nx.devectorize(t, keep_names: false)
    Plugboard.buffer!(client, Nx.to_binary(t), dtype(t.type), t.shape, device: device)
  end

  @doc false
  # A host array (a hook's or a runtime call's operand) as a tensor of `template`'s type and shape, in
  # Nx.BinaryBackend (what Nx documents runtime_call's function gets from a compiler).
  def from_host(%T{vectorized_axes: [_ | _] = axes} = template, host) do
    template |> Nx.devectorize(keep_names: false) |> from_host(host) |> Nx.vectorize(axes)
  end

  def from_host(%T{type: type, shape: shape, names: names}, %Plugboard.HostTensor{data: data}) do
    %T{data: %Nx.BinaryBackend{state: data}, type: type, shape: shape, names: names, vectorized_axes: []}
  end

  @doc false
  def from_buffer(%T{} = template, buffer, client), do: %{template | data: %__MODULE__{buffer: buffer, client: client}}

  ## Creation

  @impl true
  def init(opts) do
    Keyword.validate!(opts, [:client, :device_id])
  end

  defp client(opts), do: Plugboard.Nx.client!(opts)

  @impl true
  def from_binary(%T{type: type, shape: shape} = out, binary, opts) do
    client = client(opts)
    buffer = Plugboard.buffer!(client, binary, dtype(type), shape, device: Keyword.get(opts, :device_id, 0))
    %{out | data: %__MODULE__{buffer: buffer, client: client}}
  end

  @impl true
  def constant(out, number, opts), do: via_binary(out, opts, &Nx.BinaryBackend.constant(&1, number, []))

  @impl true
  def eye(out, opts), do: via_binary(out, opts, &Nx.BinaryBackend.eye(&1, []))

  @impl true
  def iota(out, axis, opts), do: via_binary(out, opts, &Nx.BinaryBackend.iota(&1, axis, []))

  defp via_binary(out, opts, fun), do: from_binary(out, Nx.to_binary(fun.(out)), opts)

  ## Memory

  # The buffer's device address (PJRT_Buffer_UnsafePointer), as EXLA gives it: valid while the tensor
  # lives. Only :local pointers: PJRT has no IPC handle in its C API.
  @impl true
  def to_pointer(%T{data: %__MODULE__{buffer: buffer}} = t, opts) do
    case Keyword.get(opts, :mode, :local) do
      :local ->
        case Plugboard.device_pointer(buffer) do
          {:ok, address} -> %Nx.Pointer{kind: :local, address: address, data_size: Nx.byte_size(t)}
          {:error, error} -> raise ArgumentError, "Plugboard.Nx.Backend.to_pointer: #{Exception.message(error)}"
        end

      mode ->
        raise ArgumentError, "Plugboard.Nx.Backend.to_pointer: mode #{inspect(mode)} is not supported (only :local: PJRT's C API has no IPC handles)"
    end
  end

  # A tensor over memory someone else owns (a device address, as to_pointer/2 gives): a view, never
  # copied or donated. The owner keeps the memory alive while the tensor is in use. The pointer's
  # data_size bounds what is read: a shape that needs more bytes, or a pointer that does not say, is
  # refused; so is the address 0.
  @impl true
  def from_pointer(%Nx.Pointer{kind: :local, address: address, data_size: size}, type, shape, backend_opts, opts)
      when is_integer(address) and is_integer(size) do
    backend_opts = init(backend_opts)
    client = client(backend_opts)
    device = Keyword.get(backend_opts, :device_id, 0)

    case Plugboard.buffer_from_pointer(client, address, dtype(type), shape, device: device, size: size) do
      {:ok, buffer} -> %T{type: type, shape: shape, names: opts[:names], data: %__MODULE__{buffer: buffer, client: client}}
      {:error, error} -> raise ArgumentError, "Plugboard.Nx.Backend.from_pointer: #{Exception.message(error)}"
    end
  end

  def from_pointer(%Nx.Pointer{kind: :local, address: address, data_size: size}, _type, _shape, _backend_opts, _opts)
      when is_integer(address),
      do: raise(ArgumentError, "Plugboard.Nx.Backend.from_pointer: the pointer's data_size must be the number of bytes at its address (Nx.to_pointer sets it), got #{inspect(size)}")

  def from_pointer(pointer, _type, _shape, _backend_opts, _opts),
    do: raise(ArgumentError, "Plugboard.Nx.Backend.from_pointer: only local pointers with an address (Nx.to_pointer(t, mode: :local)), got #{inspect(pointer)}")

  @impl true
  def to_binary(%T{data: %__MODULE__{buffer: buffer}} = t, limit) do
    binary = Plugboard.to_binary!(buffer)
    size = div(elem(t.type, 1), 8)
    if limit * size < byte_size(binary), do: binary_part(binary, 0, limit * size), else: binary
  end

  @impl true
  def inspect(%T{} = t, opts) do
    limit = if opts.limit == :infinity, do: Nx.size(t), else: opts.limit + 1
    Nx.Backend.inspect(t, to_binary(t, min(limit, Nx.size(t))), opts)
  end

  @impl true
  def backend_copy(%T{} = t, backend, opts), do: backend.from_binary(t, to_binary(t, Nx.size(t)), opts)

  @impl true
  def backend_transfer(%T{} = t, __MODULE__, []), do: t

  def backend_transfer(%T{data: %__MODULE__{client: %{resource: r}}} = t, __MODULE__, opts) do
    if client(opts).resource == r, do: t, else: moved(backend_copy(t, __MODULE__, opts), t)
  end

  def backend_transfer(%T{} = t, backend, opts), do: moved(backend_copy(t, backend, opts), t)

  defp moved(copy, original) do
    backend_deallocate(original)
    copy
  end

  # The garbage collector owns the buffer (a plugboard resource) and releases it once no term refers
  # to it; this releases the device memory now (Plugboard.free/1), as a loop over large tensors needs
  # before the GC notices them. Later use of the tensor is an error that says it was freed.
  @impl true
  def backend_deallocate(%T{data: %__MODULE__{buffer: buffer}}) do
    if Plugboard.valid?(buffer) and Plugboard.free(buffer) == :ok, do: :ok, else: :already_deallocated
  end

  @impl true
  def to_batched(out, %T{} = t, opts) do
    client = client_of([t])
    host = backend_copy(t, Nx.BinaryBackend, [])
    out |> Nx.BinaryBackend.to_batched(host, opts) |> Enum.map(&Nx.backend_copy(&1, {__MODULE__, client: client}))
  end

  ## Operations: each one a jitted program over Nx.Defn.Expr

  # The program runs where its first device tensor lives (client and device). An operation may run
  # while a defn is being traced (code in it computing on a tensor it closes over): it is a
  # compilation of its own (on_conflict: :force), not part of the traced one. It is not the user's jit
  # either: an operand marked Nx.donatable/1 keeps its mark (for the user's next jit or compile call)
  # and its buffer (Plugboard.Nx.Donation.unmark/1).
  defp jit(args, fun) do
    opts =
      case placement(args) do
        nil -> [client: Plugboard.Nx.client!([])]
        {client, 0} -> [client: client]
        {client, device} -> [client: client, device_id: device]
      end

    Nx.Defn.jit_apply(fun, Enum.map(args, &Plugboard.Nx.Donation.unmark/1), [compiler: Plugboard.Nx, on_conflict: :force] ++ opts)
  end

  defp client_of(args) do
    case placement(args) do
      {client, _} -> client
      nil -> Plugboard.Nx.client!([])
    end
  end

  defp placement(args) do
    Enum.find_value(List.flatten(Enum.map(args, &flat/1)), fn
      %T{data: %__MODULE__{client: client, buffer: buffer}} -> {client, buffer.device}
      _ -> nil
    end)
  end

  defp flat(tuple) when is_tuple(tuple), do: Tuple.to_list(tuple)
  defp flat(other), do: [other]

  binary_ops =
    [:add, :subtract, :multiply, :pow, :remainder, :divide, :atan2, :min, :max, :quotient] ++
      [:bitwise_and, :bitwise_or, :bitwise_xor, :left_shift, :right_shift] ++
      [:equal, :not_equal, :greater, :less, :greater_equal, :less_equal] ++
      [:logical_and, :logical_or, :logical_xor]

  for op <- binary_ops do
    @impl true
    def unquote(op)(out, a, b) do
      out = Nx.to_template(out)
      jit([a, b], fn a, b -> Nx.Defn.Expr.unquote(op)(out, a, b) end)
    end
  end

  unary_ops =
    Enum.map(Nx.Shared.unary_math_funs(), &elem(&1, 0)) ++
      [:abs, :bitwise_not, :ceil, :conjugate, :floor, :negate, :round, :sign] ++
      [:count_leading_zeros, :population_count, :real, :imag, :is_nan, :is_infinity, :as_type, :bitcast, :reshape]

  for op <- unary_ops do
    @impl true
    def unquote(op)(out, a) do
      out = Nx.to_template(out)
      jit([a], fn a -> Nx.Defn.Expr.unquote(op)(out, a) end)
    end
  end

  # Operations whose other arguments are options, axes or shapes (closed over, not traced).
  with_options = [
    squeeze: 1, transpose: 1, reverse: 1, all: 1, any: 1, sum: 1, product: 1, reduce_max: 1,
    reduce_min: 1, argmax: 1, argmin: 1, sort: 1, argsort: 1, fft: 1, ifft: 1, broadcast: 2
  ]

  for {op, extra} <- with_options do
    args = Macro.generate_arguments(extra, __MODULE__)

    @impl true
    def unquote(op)(out, a, unquote_splicing(args)) do
      out = Nx.to_template(out)
      jit([a], fn a -> Nx.Defn.Expr.unquote(op)(out, a, unquote_splicing(args)) end)
    end
  end

  for op <- [:window_sum, :window_product, :window_max, :window_min] do
    @impl true
    def unquote(op)(out, a, window, opts) do
      out = Nx.to_template(out)
      jit([a], fn a -> Nx.Defn.Expr.unquote(op)(out, a, window, opts) end)
    end
  end

  for op <- [:gather] do
    @impl true
    def unquote(op)(out, a, indices, opts) do
      out = Nx.to_template(out)
      jit([a, indices], fn a, indices -> Nx.Defn.Expr.unquote(op)(out, a, indices, opts) end)
    end
  end

  for op <- [:indexed_add, :indexed_put] do
    @impl true
    def unquote(op)(out, a, indices, updates, opts) do
      out = Nx.to_template(out)
      jit([a, indices, updates], fn a, i, u -> Nx.Defn.Expr.unquote(op)(out, a, i, u, opts) end)
    end
  end

  for op <- [:window_scatter_max, :window_scatter_min] do
    @impl true
    def unquote(op)(out, a, source, init, window, opts) do
      out = Nx.to_template(out)
      jit([a, source, init], fn a, s, i -> Nx.Defn.Expr.unquote(op)(out, a, s, i, window, opts) end)
    end
  end

  @impl true
  def pad(out, a, value, config) do
    out = Nx.to_template(out)
    jit([a, value], fn a, v -> Nx.Defn.Expr.pad(out, a, v, config) end)
  end

  @impl true
  def dot(out, a, ca, ba, b, cb, bb) do
    out = Nx.to_template(out)
    jit([a, b], fn a, b -> Nx.Defn.Expr.dot(out, a, ca, ba, b, cb, bb) end)
  end

  @impl true
  def clip(out, a, min, max) do
    out = Nx.to_template(out)
    jit([a, min, max], fn a, lo, hi -> Nx.Defn.Expr.clip(out, a, lo, hi) end)
  end

  @impl true
  def select(out, pred, on_true, on_false) do
    out = Nx.to_template(out)
    jit([pred, on_true, on_false], fn p, t, f -> Nx.Defn.Expr.select(out, p, t, f) end)
  end

  @impl true
  def conv(out, a, kernel, opts) do
    out = Nx.to_template(out)
    jit([a, kernel], fn a, k -> Nx.Defn.Expr.conv(out, a, k, opts) end)
  end

  @impl true
  def triangular_solve(out, a, b, opts) do
    out = Nx.to_template(out)
    jit([a, b], fn a, b -> Nx.Defn.Expr.triangular_solve(out, a, b, opts) end)
  end

  @impl true
  def concatenate(out, tensors, axis) do
    out = Nx.to_template(out)
    jit([List.to_tuple(tensors)], fn tuple -> Nx.Defn.Expr.concatenate(out, Tuple.to_list(tuple), axis) end)
  end

  # Start indices are operands of the program, never constants in it: the integers packed in one s64
  # vector, the tensors traced with the operand. One program serves every start of a shape (100
  # starts were 100 compiles of ~70 ms each).
  @impl true
  def slice(out, a, starts, lengths, strides) do
    out = Nx.to_template(out)
    {packed, tensors, rebuild} = split_indices(starts)
    jit([a, packed, tensors], fn a, p, d -> Nx.Defn.Expr.slice(out, a, rebuild.(p, d), lengths, strides) end)
  end

  @impl true
  def put_slice(out, a, starts, slice) do
    out = Nx.to_template(out)
    {packed, tensors, rebuild} = split_indices(starts)
    jit([a, packed, tensors, slice], fn a, p, d, s -> Nx.Defn.Expr.put_slice(out, a, rebuild.(p, d), s) end)
  end

  defp split_indices(starts) do
    ints = for i <- starts, is_integer(i), do: i
    packed = if ints == [], do: {}, else: Nx.tensor(ints, type: :s64, backend: Nx.BinaryBackend)
    tensors = List.to_tuple(for %T{} = t <- starts, do: t)
    shape = Enum.map(starts, &is_integer/1)

    rebuild = fn packed, tuple ->
      {list, {_, []}} =
        Enum.map_reduce(shape, {0, Tuple.to_list(tuple)}, fn
          true, {i, rest} -> {packed |> Nx.slice([i], [1]) |> Nx.reshape({}), {i + 1, rest}}
          false, {i, [t | rest]} -> {t, {i, rest}}
        end)

      list
    end

    {packed, tensors, rebuild}
  end

  @impl true
  def reduce(out, a, acc, opts, fun) do
    out = Nx.to_template(out)
    jit([a, acc], fn a, acc -> Nx.Defn.Expr.reduce(out, a, acc, opts, fun) end)
  end

  @impl true
  def window_reduce(out, a, acc, window, opts, fun) do
    out = Nx.to_template(out)
    jit([a, acc], fn a, acc -> Nx.Defn.Expr.window_reduce(out, a, acc, window, opts, fun) end)
  end

  @impl true
  def stack(out, tensors, axis) do
    out = Nx.to_template(out)
    jit([List.to_tuple(tensors)], fn tuple -> Nx.Defn.Expr.stack(out, Tuple.to_list(tuple), axis) end)
  end

  # A block runs as one program: inside it, Nx.block/4 builds the block's node again, which
  # Plugboard.Nx.Blocks lowers natively or through Nx's default.
  @impl true
  def block(struct, output, args, fun) do
    {tensors, opts} = Enum.split_while(args, &(not is_list(&1)))
    output = Nx.to_template(output)
    jit([List.to_tuple(tensors)], fn tuple -> Nx.block(struct, Tuple.to_list(tuple) ++ opts, output, fun) end)
  end

end
