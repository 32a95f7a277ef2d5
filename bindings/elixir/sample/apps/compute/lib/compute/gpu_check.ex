# Compiled only when the release is built with Nx (see apps/compute/mix.exs).
if Code.ensure_loaded?(Nx) and Code.ensure_loaded?(Plugboard.Nx) do
  defmodule Compute.GpuCheck do
    @moduledoc """
    What `scripts/gpu_check.sh` runs on the booted target: a training step of `Compute.NxJob`'s MLP,
    an `Nx.runtime_call` (an Elixir function called from inside the running program, through
    plugboard's host callbacks: on CUDA, the callback bridge), an ordered hook (Nx 1.0's io_call) bound
    with `hooks:`, and a donated buffer the program writes its aliased output into. Prints one line of
    `key=value`s for the script to compare with the same line from a CPU target.
    """
    import Nx.Defn

    # x * 2 goes out to Elixir, comes back + 0.5, and the program goes on with it.
    defn with_runtime_call(x) do
      y = Nx.runtime_call(x, x * 2, [offset: 0.5], &__MODULE__.add_offset/2)
      Nx.sum(y * y)
    end

    def add_offset(t, opts), do: Nx.add(t, opts[:offset])

    # An ordered host call (Nx 0.13's hook, Nx 1.0's io_call): x * 2 is handed to the `hooks:` function
    # bound to :doubled, in program order, and the program goes on.
    defn with_hook(x), do: hook(x * 2, :doubled) + 1

    # x + y with x declared as the output's alias (as jax.jit(donate_argnums=0) lowers it): donated, the
    # plugin writes the sum where x was.
    @aliasing_add """
    func.func public @main(%a: tensor<256xf32> {tf.aliasing_output = 0 : i32}, %b: tensor<256xf32>) -> tensor<256xf32> {
      %0 = stablehlo.add %a, %b : tensor<256xf32>
      return %0 : tensor<256xf32>
    }
    """

    defp donated_in_place?(client) do
      exe = Plugboard.compile!(client, @aliasing_add)
      ones = fn -> Plugboard.buffer!(client, :binary.copy(<<1.0::float-32-native>>, 256), :f32, {256}, copy: true) end
      x = ones.()
      {:ok, address} = Plugboard.device_pointer(x)
      [sum] = Plugboard.run!(exe, [x, ones.()], donate: [0])
      {:ok, at} = Plugboard.device_pointer(sum)
      at == address and Plugboard.to_binary!(sum) == :binary.copy(<<2.0::float-32-native>>, 256)
    end

    def run do
      client = Plugboard.client!()
      {:ok, devices} = Plugboard.devices(client)
      {first, last} = Compute.NxJob.train(client)

      called = Nx.Defn.jit(&with_runtime_call/1, compiler: Plugboard.Nx, client: client).(Nx.iota({8}, type: :f32))
      me = self()
      hooks = %{doubled: fn t -> send(me, {:doubled, Nx.to_number(Nx.sum(t))}) end}
      Nx.Defn.jit(&with_hook/1, compiler: Plugboard.Nx, client: client, hooks: hooks).(Nx.iota({8}, type: :f32))
      hooked = receive do: ({:doubled, sum} -> sum), after: (10_000 -> :none)

      IO.puts(
        "gpu_check: platform=#{client.platform} devices=#{length(devices)} " <>
          "loss_first=#{Nx.to_number(first)} loss_last=#{Nx.to_number(last)} runtime_call=#{Nx.to_number(called)} " <>
          "hook=#{hooked} donated_in_place=#{donated_in_place?(client)}"
      )
    end
  end
end
