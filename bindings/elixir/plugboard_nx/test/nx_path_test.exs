defmodule Plugboard.Nx.NxPathTest do
  # mix.exs's PLUGBOARD_NX_PATH (build against an Nx source folder): a folder that holds no Nx project
  # is refused when Mix loads the project, naming the folder and what to give instead; neighbours
  # (complex/, telemetry/) are taken from beside it only where they are there; a Hex package ignores it.
  use ExUnit.Case, async: true

  @tag :tmp_dir
  test "PLUGBOARD_NX_PATH naming a folder without mix.exs is refused, naming it", %{tmp_dir: dir} do
    {out, status} =
      System.cmd("mix", ["deps"], cd: Path.expand("..", __DIR__), env: [{"PLUGBOARD_NX_PATH", dir}, {"MIX_ENV", "test"}], stderr_to_stdout: true)

    assert status != 0
    assert out =~ "PLUGBOARD_NX_PATH=#{dir}: no mix.exs there"
  end

  # In a build root of its own: the suite's own (MIX_BUILD_ROOT) holds a compiled nx, whose version
  # `mix deps` would print and whose build it must not touch.
  defp deps_listing(project_dir, nx_path) do
    env = [{"PLUGBOARD_NX_PATH", nx_path}, {"MIX_ENV", "test"}, {"MIX_BUILD_ROOT", Path.join(Path.dirname(nx_path), "_build")}]
    System.cmd("mix", ["deps"], cd: project_dir, env: env, stderr_to_stdout: true)
  end

  defp fake_nx(dir) do
    File.mkdir_p!(Path.join(dir, "nx"))
    File.write!(Path.join(dir, "nx/mix.exs"), """
    defmodule FakeNx.MixProject do
      use Mix.Project
      def project, do: [app: :nx, version: "1.0.0"]
    end
    """)

    Path.join(dir, "nx")
  end

  @tag :tmp_dir
  test "a checkout of Nx's repository (nx/ alone) leaves complex and telemetry to Hex", %{tmp_dir: dir} do
    nx = fake_nx(dir)
    {out, _status} = deps_listing(Path.expand("..", __DIR__), nx)
    assert out =~ ~r/^\* nx( \S+)? \(#{Regex.escape(nx)}\)/m
    refute out =~ Path.join(dir, "complex")
    refute out =~ Path.join(dir, "telemetry")
  end

  @tag :tmp_dir
  test "a Hex package of plugboard_nx (hex_metadata.config beside mix.exs) ignores PLUGBOARD_NX_PATH", %{tmp_dir: dir} do
    nx = fake_nx(dir)
    package = Path.join(dir, "plugboard_nx")
    File.mkdir_p!(package)
    File.cp!(Path.expand("../mix.exs", __DIR__), Path.join(package, "mix.exs"))
    File.write!(Path.join(package, "hex_metadata.config"), "{<<\"name\">>,<<\"plugboard_nx\">>}.\n")
    {out, _status} = deps_listing(package, nx)
    refute out =~ nx
    assert out =~ ~r/\* nx \(Hex package\)/
  end
end
