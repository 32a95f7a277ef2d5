defmodule Plugboard.ReleaseTest do
  # Plugboard.Release.embed/1 on a release folder laid out as `mix release` leaves it (issue 24): the
  # bundle is built beside the old one and swapped in whole, under a lock; a failed build keeps the
  # old bundle; the step marks the release as one that needs its bundle before anything can fail.
  use ExUnit.Case, async: true
  import Plugboard.TestSupport

  setup do
    root = Path.join(System.tmp_dir!(), "plugboard-release-test-#{System.unique_integer([:positive])}")
    app = Path.join([root, "lib", "plugboard-0.1.0"])
    File.mkdir_p!(Path.join([app, "priv", "bin"]))
    File.ln_s!(cli(), Path.join([app, "priv", "bin", "plugboard"]))
    on_exit(fn -> File.rm_rf!(root) end)
    %{root: root, bundle: Path.join([app, "priv", "bundle"]), marker: Path.join([app, "priv", "bundle.required"])}
  end

  defp release(root, targets) do
    %Mix.Release{
      name: :embed_test,
      version: "0.1.0",
      path: root,
      version_path: Path.join([root, "releases", "0.1.0"]),
      applications: %{plugboard: [vsn: ~c"0.1.0"]},
      options: [plugboard: [targets: targets, lock_file: Path.join(root, "plugboard.lock")]],
      steps: []
    }
  end

  defp embed(root, targets) do
    Mix.shell(Mix.Shell.Quiet)
    Plugboard.Release.embed(release(root, targets))
  end

  # The bundle's targets, each file present with the manifest's sha256 (discover verifies them).
  defp good_bundle!(bundle) do
    assert {:ok, report} = Plugboard.discover(bundle: bundle, use_environment: false)
    for c <- report.candidates, do: assert(Enum.any?(c.stages, &(&1.stage == :verified and &1.passed)), inspect(c))
    report.candidates |> Enum.map(& &1.name) |> Enum.sort()
  end

  test "the step marks the release as needing its bundle, first of all", %{root: root, marker: marker, bundle: bundle} do
    assert_raise Mix.Error, ~r/is not a file|does not exist|No such file|cannot embed/, fn ->
      embed(root, one: Path.join(root, "no-such-plugin.so"))
    end

    assert File.read!(marker) =~ "bundle_required: false"
    refute File.exists?(bundle)
  end

  test "a failed rebuild keeps the old bundle whole", %{root: root, bundle: bundle} do
    embed(root, good: fault_plugin("fault_well_formed"))
    assert good_bundle!(bundle) == ["good"]

    assert_raise Mix.Error, ~r/cannot embed target/, fn ->
      embed(root, good: fault_plugin("fault_well_formed"), bad: Path.join(root, "no-such-plugin.so"))
    end

    assert good_bundle!(bundle) == ["good"]
    refute File.exists?(Path.join(Path.dirname(bundle), ".bundle.staging"))
  end

  test "a rebuild replaces the bundle whole: the new targets only", %{root: root, bundle: bundle} do
    embed(root, a: fault_plugin("fault_well_formed"))
    embed(root, b: fault_plugin("fault_init_error"))
    assert good_bundle!(bundle) == ["b"]
  end

  test "concurrent builds of one release leave one good bundle", %{root: root, bundle: bundle} do
    builds =
      for n <- 1..4 do
        targets = [{:"a#{n}", fault_plugin("fault_well_formed")}, {:"b#{n}", fault_plugin("fault_init_error")}]
        Task.async(fn -> embed(root, targets) end)
      end

    Task.await_many(builds, 120_000)
    assert [a, b] = good_bundle!(bundle)
    assert String.slice(a, 1..-1//1) == String.slice(b, 1..-1//1), "one build's pair: #{a}, #{b}"
    refute File.exists?(Path.join(Path.dirname(bundle), ".bundle.staging"))
  end
end
