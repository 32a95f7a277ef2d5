defmodule Plugboard.Nx.Case do
  @moduledoc false
  # The real CPU plugins (as the :plugboard package's tests find them) and comparisons with
  # Nx.BinaryBackend through Nx.Defn.Evaluator.
  import ExUnit.Assertions

  def deps_dir,
    do: System.get_env("PLUGBOARD_DEPS_DIR") || Path.join([System.user_home!(), ".cache", "plugboard", "deps"])

  @default_plugins ["xla_cpu_081/xla_cpu_pjrt.so", "xla_cpu_106/libpjrt_cpu.so", "xla_cpu_115/pjrt_c_api_cpu_plugin.so"]

  def cpu_plugins do
    paths =
      case System.get_env("PLUGBOARD_TEST_PLUGINS") do
        nil -> Enum.map(@default_plugins, &Path.join([deps_dir(), "files", &1]))
        list -> String.split(list, ":", trim: true)
      end

    Enum.map(paths, fn p -> {p |> Path.dirname() |> Path.basename(), p} end)
  end

  @doc "A client of each CPU plugin, opened once per test run."
  def client(path) do
    case :persistent_term.get({__MODULE__, path}, nil) do
      nil ->
        {:ok, client} = Plugboard.open(path)
        :persistent_term.put({__MODULE__, path}, client)
        client

      client ->
        client
    end
  end

  @doc "Runs `fun` on `args` through Plugboard.Nx on `client` and through the Evaluator; asserts they agree."
  def assert_same(client, fun, args, opts \\ []) do
    expected = Nx.Defn.jit_apply(fun, args, compiler: Nx.Defn.Evaluator)
    actual = Nx.Defn.jit_apply(fun, args, compiler: Plugboard.Nx, client: client)
    assert_containers(actual, expected, opts)
    actual
  end

  def assert_containers(actual, expected, opts) do
    # The same container (a map's keys, a tuple's size), then the same leaves.
    shape_of = &Nx.Defn.Composite.traverse(&1, fn _ -> :leaf end)
    assert shape_of.(actual) == shape_of.(expected)
    a = Nx.Defn.Composite.flatten_list([actual])
    e = Nx.Defn.Composite.flatten_list([expected])
    assert length(a) == length(e)

    Enum.zip_with(a, e, fn a, e ->
      assert a.vectorized_axes == e.vectorized_axes
      {a, e} = {Nx.devectorize(a), Nx.devectorize(e)}
      assert a.type == e.type, "type #{inspect(a.type)}, expected #{inspect(e.type)}"
      assert a.shape == e.shape, "shape #{inspect(a.shape)}, expected #{inspect(e.shape)}"
      a = Nx.backend_transfer(a, Nx.BinaryBackend)

      if Nx.Type.float?(e.type) or Nx.Type.complex?(e.type) do
        atol = Keyword.get(opts, :atol, 1.0e-5)
        rtol = Keyword.get(opts, :rtol, 1.0e-4)

        assert Nx.all_close(a, e, atol: atol, rtol: rtol, equal_nan: true) |> Nx.to_number() == 1,
               "values differ:\n#{inspect(a)}\nexpected\n#{inspect(e)}"
      else
        assert Nx.to_binary(a) == Nx.to_binary(e), "values differ:\n#{inspect(a)}\nexpected\n#{inspect(e)}"
      end
    end)
  end
end
