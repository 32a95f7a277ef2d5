defmodule Plugboard.Nx.GuidesDoctestTest do
  # The `iex>` examples of the guides in the repository's docs/ that an Nx reader runs, as doctests
  # (ExUnit.DocTest.doctest_file/1) on a CPU plugin, the default client of Plugboard.Nx for the
  # module's tests. A guide whose examples drift from what the code does fails here. Outside the
  # repository (a Hex package's copy of this folder) there are no guides, and nothing runs.
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

  test "the guides with examples are there (in the repository)" do
    if File.dir?(@guides), do: for(g <- @with_examples, do: assert(File.exists?(Path.join(@guides, g)), "#{g} missing from #{@guides}"))
  end
end
