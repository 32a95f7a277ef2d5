defmodule Plugboard.Nx.GuidesDoctestTest do
  # The `iex>` examples of the guides in the repository's docs/ that an Nx reader runs (through
  # ExUnit.DocTest.doctest_file/1), and of the modules' docs, as doctests on a CPU plugin, the default
  # client of Plugboard.Nx for the module's tests. A guide or a doc whose examples drift from what the
  # code does fails here. Outside the repository (a Hex package's copy of this folder) there are no
  # guides, and their part does not run.
  use ExUnit.Case, async: false

  @guides Path.expand("../../../../docs", __DIR__)
  @with_examples ~w(nx.md)

  setup_all do
    {_, path} = hd(Plugboard.Nx.Case.cpu_plugins())
    previous = :persistent_term.get({Plugboard.Nx, :default}, nil)
    Plugboard.Nx.put_default_client(Plugboard.Nx.Case.client(path))

    on_exit(fn ->
      if previous, do: Plugboard.Nx.put_default_client(previous), else: :persistent_term.erase({Plugboard.Nx, :default})
    end)

    :ok
  end

  for guide <- @with_examples, path = Path.join(@guides, guide), File.exists?(path) do
    @external_resource path
    doctest_file path
  end

  # The modules' own examples, on the same default client.
  doctest Plugboard.Nx
  doctest Plugboard.Nx.Backend

  defmodule MyModel do
    import Nx.Defn
    defn predict(params, x), do: Nx.dot(x, params.w) + params.b
  end

  # The Nx guide's opening lines (docs/nx.md), verbatim between the two marks, on the default client.
  test "the Nx guide's opening lines" do
    params = %{w: Nx.tensor([[1.0], [2.0]]), b: Nx.tensor([0.5])}
    x = Nx.tensor([[1.0, 1.0], [2.0, 0.0]])
    previous_options = Nx.Defn.default_options()
    previous_backend = Nx.default_backend()

    try do
      # [guide]
      y = Nx.Defn.jit(&MyModel.predict/2, compiler: Plugboard.Nx).(params, x)  # or client:, target:
      Nx.Defn.global_default_options(compiler: Plugboard.Nx)   # every jit from now on
      Nx.default_backend(Plugboard.Nx.Backend)                 # eager ops on the device
      mlir = Plugboard.Nx.to_mlir(&MyModel.predict/2, [params, x])   # the StableHLO, to read
      # [guide]

      assert Nx.to_flat_list(y) == [3.5, 2.5]
      assert Nx.to_flat_list(Nx.Defn.jit(&MyModel.predict/2).(params, x)) == [3.5, 2.5]
      assert Nx.Defn.default_options()[:compiler] == Plugboard.Nx
      assert match?({Plugboard.Nx.Backend, _}, Nx.default_backend())
      assert mlir =~ "stablehlo.dot_general" or mlir =~ "stablehlo.dot"
    after
      Nx.Defn.global_default_options(previous_options)
      Nx.default_backend(previous_backend)
    end
  end

  test "the guides with examples are there (in the repository)" do
    if File.dir?(@guides), do: for(g <- @with_examples, do: assert(File.exists?(Path.join(@guides, g)), "#{g} missing from #{@guides}"))
  end
end
