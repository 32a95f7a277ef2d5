defmodule Plugboard.Nx.PartitionsTest do
  # Nx.Serving with partitions: true runs one partition per device of the client (cpu_device_count
  # on the CPU plugins): batches run at the same time, each on its own device, with the right
  # results. The clients are configured as an application would (config :plugboard_nx, :clients
  # with create_options:).
  use ExUnit.Case, async: false
  import Plugboard.Nx.Case

  defmodule Barrier do
    @moduledoc false
    # Holds every caller of arrive/1 until `parties` of them are there: a batch that reaches it
    # waits for the others, so the test can only pass when that many batches run at once.
    use GenServer

    def start_link(parties), do: GenServer.start_link(__MODULE__, parties, name: __MODULE__)
    def arrive(timeout), do: GenServer.call(__MODULE__, :arrive, timeout)
    def init(parties), do: {:ok, {parties, []}}

    def handle_call(:arrive, from, {parties, waiting}) do
      waiting = [from | waiting]

      if length(waiting) == parties do
        Enum.each(waiting, &GenServer.reply(&1, :ok))
        {:noreply, {parties, []}}
      else
        {:noreply, {parties, waiting}}
      end
    end
  end

  defmodule Work do
    @moduledoc false
    import Nx.Defn

    # y = 3x + 1, through a host call that waits at the barrier (in the partition's process).
    defn at_barrier(x) do
      y = Nx.runtime_call(x, x * 3, [], &__MODULE__.wait/2)
      y + 1
    end

    def wait(t, _opts) do
      :ok = Barrier.arrive(30_000)
      t
    end

    defn plain(x), do: Nx.sin(x) * 2
  end

  defp device_of(%Nx.Tensor{data: %Plugboard.Nx.Backend{buffer: b}}), do: b.device

  defp serving(fun, name, client) do
    Nx.Serving.new(fn opts -> Nx.Defn.jit(fun, opts) end, compiler: Plugboard.Nx, client: client)
    |> then(&start_supervised!({Nx.Serving, serving: &1, name: name, batch_size: 1, partitions: true}, id: name))
  end

  for {label, path} <- cpu_plugins(), devices <- [2, 4] do
    describe "#{label} with cpu_device_count #{devices}" do
      setup do
        name = :"partitions_#{unquote(label)}_#{unquote(devices)}"
        clients = Application.get_env(:plugboard_nx, :clients, [])
        Application.put_env(:plugboard_nx, :clients, Keyword.put(clients, name, plugin: unquote(path), create_options: [{"cpu_device_count", unquote(devices)}]))
        on_exit(fn -> Application.delete_env(:plugboard_nx, :clients) end)
        %{client: name, devices: unquote(devices)}
      end

      test "one partition per device; as many batches run at once, each on its own device", %{client: client, devices: n} do
        assert {:ok, listed} = Plugboard.devices(Plugboard.Nx.client!(client: client))
        assert length(listed) == n
        assert Enum.map(Plugboard.Nx.__partitions_options__(client: client), & &1[:device_id]) == Enum.to_list(0..(n - 1))

        start_supervised!({Barrier, n})
        serving(&Work.at_barrier/1, :barrier_serving, client)

        results =
          1..n
          |> Task.async_stream(
            fn i -> {i, Nx.Serving.batched_run(:barrier_serving, Nx.Batch.stack([Nx.tensor([i * 1.0, -i * 1.0])]))} end,
            max_concurrency: n,
            timeout: 60_000
          )
          |> Enum.map(fn {:ok, r} -> r end)

        for {i, result} <- results, do: assert(Nx.to_flat_list(result) == [3.0 * i + 1, -3.0 * i + 1])
        # Every partition held a batch at the barrier at once: n batches on n distinct devices.
        assert results |> Enum.map(fn {_, r} -> device_of(r) end) |> Enum.sort() == Enum.to_list(0..(n - 1))
      end

      test "many batches through the partitions: every result right, on the devices of the client", %{client: client, devices: n} do
        serving(&Work.plain/1, :plain_serving, client)

        results =
          1..(8 * n)
          |> Task.async_stream(fn i -> {i, Nx.Serving.batched_run(:plain_serving, Nx.Batch.stack([Nx.tensor([i / 10, i / 5])]))} end,
            max_concurrency: 2 * n,
            timeout: 60_000
          )
          |> Enum.map(fn {:ok, r} -> r end)

        for {i, result} <- results do
          expected = Nx.multiply(Nx.sin(Nx.tensor([[i / 10, i / 5]])), 2)
          assert_containers(result, expected, [])
          assert device_of(result) in 0..(n - 1)
        end
      end
    end
  end
end
