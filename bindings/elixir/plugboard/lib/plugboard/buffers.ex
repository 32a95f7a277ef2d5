defmodule Plugboard.Buffers do
  @moduledoc """
  Arrays on a device: made from a binary or from an address, read back, given up (`free/1`), shared
  with another library by address. `Plugboard` delegates these calls here.
  """
  alias Plugboard.{Buffer, Client, Error, HostTensor, Native, NativeReply, Options}

  @doc """
  A device buffer from a binary of row-major little-endian elements (`byte_size` must be what dtype
  and shape call for; `:bool` elements are the bytes 0 and 1). A binary over 64 bytes is adopted
  rather than copied where the platform allows it (zero-copy on CPU when its bytes are 64-byte
  aligned); the binary is kept alive as long as the device uses it, and such a buffer is never
  donatable, wherever its bytes lie. Options: `device:` (index, default 0), `copy:` (default false:
  true copies the bytes, and the buffer can be donated). Copies of more than a MiB run on a dirty
  scheduler.

      iex> {:ok, x} = Plugboard.buffer(Plugboard.client!(), <<1, 2, 3, 4, 5, 6>>, :u8, {2, 3})
      iex> {x.dtype, x.shape}
      {:u8, {2, 3}}
      iex> Plugboard.to_binary(x)
      {:ok, <<1, 2, 3, 4, 5, 6>>}
      iex> {:error, error} = Plugboard.buffer(Plugboard.client!(), <<1, 2, 3>>, :u8, {2, 3})
      iex> error.code
      :invalid_argument
  """
  @spec buffer(Client.t(), binary(), Plugboard.dtype(), tuple(), keyword()) :: Plugboard.result(Buffer.t())
  def buffer(client, data, dtype, shape, opts \\ [])

  def buffer(%Client{resource: r}, data, dtype, shape, opts) when is_binary(data) and is_tuple(shape) do
    with :ok <- Options.known(opts, [:device, :copy], "buffer"),
         {:ok, device} <- Options.index(opts, :device, 0),
         {:ok, copy} <- Options.boolean(opts, :copy, false),
         do: Native.buffer_from_binary(r, data, dtype, shape, device, copy)
  end

  def buffer(client, data, _dtype, shape, _opts) do
    cond do
      not match?(%Client{}, client) -> Options.invalid("buffer: expected a %Plugboard.Client{}, got #{inspect(client, limit: 3)}")
      not is_binary(data) -> Options.invalid("buffer: data must be a binary, got #{inspect(data, limit: 3)}")
      true -> Options.invalid("buffer: shape must be a tuple of dimension sizes, got #{inspect(shape, limit: 5)}")
    end
  end

  @doc "Same as `buffer/5`, raising the error."
  @spec buffer!(Client.t(), binary(), Plugboard.dtype(), tuple(), keyword()) :: Buffer.t()
  def buffer!(client, data, dtype, shape, opts \\ []), do: Error.unwrap!(buffer(client, data, dtype, shape, opts))

  @doc "The buffer's contents as a binary (waits for them to be computed)."
  @spec to_binary(Buffer.t(), timeout()) :: Plugboard.result(binary())
  def to_binary(buffer, timeout \\ :infinity)

  def to_binary(%Buffer{resource: r}, timeout) do
    ref = make_ref()

    with {:ok, timeout} <- Options.timeout([timeout: timeout], :timeout, :infinity),
         {:started, gate} <- Native.buffer_to_binary(r, self(), ref) do
      receive do
        {:plugboard_binary, ^ref, outcome} -> outcome
      after
        timeout -> NativeReply.give_up(gate, ref, :plugboard_binary, "the buffer was not read in #{timeout} ms")
      end
    end
  end

  def to_binary(other, _timeout), do: Options.invalid("to_binary: expected a %Plugboard.Buffer{}, got #{inspect(other, limit: 3)}")

  @doc "Same as `to_binary/2`, raising the error."
  @spec to_binary!(Buffer.t(), timeout()) :: binary()
  def to_binary!(buffer, timeout \\ :infinity), do: Error.unwrap!(to_binary(buffer, timeout))

  @doc """
  The buffer's contents as a `Plugboard.HostTensor`.

      iex> x = Plugboard.buffer!(Plugboard.client!(), <<7, 8>>, :u8, {2})
      iex> Plugboard.to_host(x)
      {:ok, %Plugboard.HostTensor{data: <<7, 8>>, dtype: :u8, shape: {2}}}
  """
  @spec to_host(Buffer.t(), timeout()) :: Plugboard.result(HostTensor.t())
  def to_host(%Buffer{} = buffer, timeout \\ :infinity) do
    with {:ok, data} <- to_binary(buffer, timeout),
         do: {:ok, %HostTensor{data: data, dtype: buffer.dtype, shape: buffer.shape}}
  end

  @doc "False once the buffer was donated to an execution or freed."
  @spec valid?(Buffer.t()) :: boolean()
  def valid?(%Buffer{resource: r}), do: Native.buffer_valid(r)

  @doc """
  Whether `Plugboard.run/3`'s `donate:` could take the buffer at the time of the call: it owns its memory (it
  is not a view of an immutable binary, as `buffer/5` makes of a binary over 64 bytes without
  `copy: true`, nor of an address, `buffer_from_pointer/5`), was neither donated nor freed, and
  nothing else is using it (a read in progress, an execution of it still starting). A library
  donating on a user's behalf passes the others as plain arguments (the plugin then copies what the
  program aliases); `Plugboard.run/3` refuses to donate them, naming the argument. The last condition can change
  the next moment: `Plugboard.run/3` refuses a buffer in use with `:aborted`, before anything runs, so the
  caller can run again without donating it.
  """
  @spec donatable?(Buffer.t()) :: boolean()
  def donatable?(%Buffer{resource: r}), do: Native.buffer_donatable(r)

  @doc """
  Releases the buffer's device memory now, rather than when the garbage collector finds its term
  unused (a term is small, so the GC may not hurry while device memory runs out). Every later use of
  the buffer is `:failed_precondition`, naming it. An execution running on it keeps the memory until
  it is done. Freeing twice is `:ok`; a donated buffer is an error.

      iex> x = Plugboard.buffer!(Plugboard.client!(), <<1, 2>>, :u8, {2})
      iex> Plugboard.free(x)
      :ok
      iex> Plugboard.valid?(x)
      false
      iex> {:error, error} = Plugboard.to_binary(x)
      iex> error.code
      :failed_precondition
  """
  @spec free(Buffer.t()) :: :ok | {:error, Error.t()}
  def free(%Buffer{resource: r}), do: Native.buffer_free(r)
  def free(other), do: Options.invalid("free: expected a %Plugboard.Buffer{}, got #{inspect(other, limit: 3)}")

  @doc """
  The address of the buffer's memory on its device (platform-dependent; on CPU a host address), for
  handing it to another library without a copy (as Nx's `to_pointer`). The address is valid only as
  long as the buffer lives and is neither freed nor donated: the caller keeps the `%Plugboard.Buffer{}`
  referenced while anything uses the address (a variable that is not used again may be garbage
  collected at once, and the device memory with it). Runs on a dirty CPU scheduler (the plugin may wait for the
  contents to be computed). `:unimplemented`, naming the plugin and `PJRT_Buffer_UnsafePointer`, for a
  plugin without it.
  """
  @spec device_pointer(Buffer.t()) :: Plugboard.result(non_neg_integer())
  def device_pointer(%Buffer{resource: r}), do: Native.buffer_device_pointer(r)
  def device_pointer(other), do: Options.invalid("device_pointer: expected a %Plugboard.Buffer{}, got #{inspect(other, limit: 3)}")

  @doc """
  A buffer over device memory at `address` (as `device_pointer/1` or another library gives it; on CPU
  a host address) holding a row-major array of `dtype` and `shape`: no copy, and no ownership. The
  buffer is a view: it keeps nothing alive, so whoever owns the memory (a `%Plugboard.Buffer{}`,
  another library) must keep it valid for as long as the view, or any output computed from it that
  may alias it, is in use. An address is just an integer: nothing can check it, and a wrong one
  crashes the VM; an address of 0 is refused. The view is never donatable. Options: `device:` (index,
  default 0); `size:` (the bytes the memory at `address` holds, as an `Nx.Pointer`'s `data_size`: a
  shape that needs more is refused, naming both, instead of reading past the end). The plugin may
  refuse an address (XLA's CPU client refuses a misaligned one); `:unimplemented`, naming the plugin
  and `PJRT_Client_CreateViewOfDeviceBuffer`, for a plugin without it.
  """
  @spec buffer_from_pointer(Client.t(), non_neg_integer(), Plugboard.dtype(), tuple(), keyword()) :: Plugboard.result(Buffer.t())
  def buffer_from_pointer(client, address, dtype, shape, opts \\ [])

  def buffer_from_pointer(%Client{resource: r}, address, dtype, shape, opts)
      when is_integer(address) and address >= 0 and is_tuple(shape) do
    with :ok <- Options.known(opts, [:device, :size], "buffer_from_pointer"),
         {:ok, device} <- Options.index(opts, :device, 0),
         {:ok, size} <- Options.optional_bytes(opts, :size),
         do: Native.buffer_from_pointer(r, address, dtype, shape, device, size)
  end

  def buffer_from_pointer(client, address, _dtype, shape, _opts) do
    cond do
      not match?(%Client{}, client) -> Options.invalid("buffer_from_pointer: expected a %Plugboard.Client{}, got #{inspect(client, limit: 3)}")
      not (is_integer(address) and address >= 0) -> Options.invalid("buffer_from_pointer: address must be a non-negative integer, got #{inspect(address, limit: 3)}")
      true -> Options.invalid("buffer_from_pointer: shape must be a tuple of dimension sizes, got #{inspect(shape, limit: 5)}")
    end
  end
end
