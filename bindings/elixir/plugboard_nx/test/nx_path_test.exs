defmodule Plugboard.Nx.NxPathTest do
  # mix.exs's PLUGBOARD_NX_PATH (build against an Nx source folder): a folder that holds no Nx project
  # is refused when Mix loads the project, naming the folder and what to give instead.
  use ExUnit.Case, async: true

  @tag :tmp_dir
  test "PLUGBOARD_NX_PATH naming a folder without mix.exs is refused, naming it", %{tmp_dir: dir} do
    {out, status} =
      System.cmd("mix", ["deps"], cd: Path.expand("..", __DIR__), env: [{"PLUGBOARD_NX_PATH", dir}, {"MIX_ENV", "test"}], stderr_to_stdout: true)

    assert status != 0
    assert out =~ "PLUGBOARD_NX_PATH=#{dir}: no mix.exs there"
  end
end
