defmodule Plugboard.Nx.BufferPressure do
  @moduledoc false
  # A device buffer is a NIF resource: the VM releases it when a garbage collection of the process
  # holding its term finds the term dropped, and a process is collected when its heap fills with
  # words, whatever device memory its terms hold. A training loop allocates few words a step and
  # drops megabytes (the last step's parameters), so tens of steps' buffers piled up between
  # collections and each step's outputs took fresh memory, faulted in page by page (an MLP step,
  # 784 -> 512 -> 512 -> 10 on a CPU plugin: ~670 page faults a step; collected after every 16 MiB
  # of outputs, ~60; bench/jax_bench.exs). As the VM counts large binaries' bytes towards a
  # collection, the bytes of the outputs a process receives count here, and past @budget the
  # process is collected (a full sweep: a buffer that outlived one collection sits in the old heap).
  # Programs with outputs under @small bytes are not counted (dispatch-sized calls pay nothing).

  @budget 16 * 1024 * 1024
  @small 64 * 1024

  @doc "The bytes of a program's outputs, from their templates: what `received/1` is given."
  def bytes(templates), do: [templates] |> Nx.Defn.Composite.flatten_list() |> Enum.reduce(0, &(Nx.byte_size(&1) + &2))

  @doc "Counts `bytes` of outputs the calling process received; collects it past the budget."
  def received(bytes) when bytes < @small, do: :ok

  def received(bytes) do
    total = Process.get(__MODULE__, 0) + bytes

    if total >= @budget do
      :erlang.garbage_collect()
      Process.put(__MODULE__, 0)
    else
      Process.put(__MODULE__, total)
    end

    :ok
  end
end
