defmodule Plugboard.ApplicationTest do
  # What the application boots from (issue 24): a release is its bundle. Restarts :plugboard: not async.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport
  import ExUnit.CaptureLog
  alias Plugboard.{Application, Report}

  setup_all do
    dir = Path.join(System.tmp_dir!(), "plugboard-application-test-#{System.unique_integer([:positive])}")
    priv = Path.join(dir, "priv")
    make_bundle(Path.join(priv, "bundle"), cpu: first_plugin())
    empty = Path.join(dir, "empty_priv")
    File.mkdir_p!(empty)
    File.write!(Path.join(empty, "bundle.required"), "test\n")
    on_exit(fn -> File.rm_rf!(dir) end)
    %{priv: priv, empty: empty, dir: dir}
  end

  defp env(vars), do: fn name -> Map.get(vars, name) end

  test "a release whose bundle is missing does not boot, and says why", %{empty: empty} do
    assert {:error, reason} = Application.boot_plan([], empty, env(%{}))
    assert reason =~ Path.join(empty, "bundle/plugboard.json") and reason =~ "is missing"
    assert reason =~ "bundle.required" and reason =~ "bundle_required: false"
    # Whatever the environment offers instead.
    assert {:error, _} = Application.boot_plan([], empty, env(%{"PLUGBOARD_PLUGIN_PATH" => first_plugin()}))
  end

  test "unless configured to boot without it", %{empty: empty, priv: priv} do
    assert :skip = Application.boot_plan([bundle_required: false], empty, env(%{}))
    assert :skip = Application.boot_plan([boot: false], empty, env(%{}))
    assert {:boot, opts, nil} = Application.boot_plan([bundle: Path.join(priv, "bundle")], empty, env(%{}))
    assert opts[:bundle] == Path.join(priv, "bundle")
    # Without the marker (a release that embeds nothing) nothing changes: no bundle, no boot.
    assert :skip = Application.boot_plan([], Path.dirname(empty), env(%{}))
  end

  test "an unreadable bundle fails the boot", %{dir: dir} do
    priv = Path.join(dir, "broken_priv")
    File.mkdir_p!(Path.join(priv, "bundle"))
    File.write!(Path.join([priv, "bundle", "plugboard.json"]), "{not json")
    assert {:boot, opts, nil} = Application.boot_plan([], priv, env(%{}))
    assert {:error, %Plugboard.Error{message: m}, nil} = Plugboard.boot(opts)
    assert m =~ "plugboard.json"
  end

  test "the embedded bundle boots without the environment's candidates", %{priv: priv} do
    bundle = Path.join(priv, "bundle")
    outside = %{"PLUGBOARD_PLUGIN_PATH" => fault_plugin("fault_well_formed"), "PJRT_NAMES_AND_LIBRARY_PATHS" => "x:/nowhere.so"}
    assert {:boot, opts, nil} = Application.boot_plan([], priv, env(outside))
    assert opts == [bundle: bundle, use_environment: false]

    assert {:ok, report} = Plugboard.discover(opts)
    assert Enum.map(report.candidates, &{&1.name, &1.origin}) == [{"cpu", :bundle}]
    # use_environment: true lets the boot read them (os-level variables: tests/elixir_release_test.sh
    # boots a release with them set; System.put_env does not reach the NIF's getenv).
    assert {:boot, with_env, nil} = Application.boot_plan([use_environment: true], priv, env(outside))
    assert with_env[:use_environment] == true and with_env[:target] == nil
  end

  test "PLUGBOARD_TARGET and PLUGBOARD_TARGETS still choose among the bundle's targets", %{priv: priv} do
    assert {:boot, opts, "PLUGBOARD_TARGET=cpu"} = Application.boot_plan([], priv, env(%{"PLUGBOARD_TARGET" => "cpu"}))
    assert opts[:target] == "cpu" and opts[:use_environment] == false and opts[:policy_source] == "PLUGBOARD_TARGET"
    assert {:boot, opts, "PLUGBOARD_TARGETS=x, cpu"} = Application.boot_plan([], priv, env(%{"PLUGBOARD_TARGETS" => "x, cpu"}))
    assert opts[:targets] == ["x", "cpu"]
    # The configuration wins.
    assert {:boot, opts, nil} = Application.boot_plan([target: "cpu"], priv, env(%{"PLUGBOARD_TARGET" => "other"}))
    assert opts[:target] == "cpu"
    assert {:error, error, report} = Plugboard.boot(elem(Application.boot_plan([], priv, env(%{"PLUGBOARD_TARGET" => "nosuch"})), 1))
    assert Exception.message(error) =~ "nosuch" and Exception.message(error) =~ "cpu"
    # The report names the variable the choice came from.
    assert report.policy =~ "PLUGBOARD_TARGET"
  end

  test "no bundle: the environment is read as before" do
    assert :skip = Application.boot_plan([], nil, env(%{}))
    assert {:boot, [use_environment: true], nil} = Application.boot_plan([], nil, env(%{"PLUGBOARD_PLUGIN_PATH" => "/x"}))
  end

  describe "the application's start" do
    setup do
      marker = Path.join(:code.priv_dir(:plugboard), "bundle.required")
      on_exit(fn ->
        File.rm(marker)
        Elixir.Application.delete_env(:plugboard, :bundle_required)
        Elixir.Application.stop(:plugboard)
        Elixir.Application.ensure_all_started(:plugboard)
      end)

      %{marker: marker}
    end

    test "fails loudly when the release's bundle is missing", %{marker: marker} do
      refute File.exists?(Path.join([:code.priv_dir(:plugboard), "bundle", "plugboard.json"]))
      File.write!(marker, "test\n")
      Elixir.Application.stop(:plugboard)

      log = capture_log(fn -> assert {:error, {:plugboard, _}} = Elixir.Application.ensure_all_started(:plugboard) end)
      assert log =~ "expects its bundle at"
      # Nothing of the failed start is left: a start right after it once found its supervisor still
      # registered ({:already_started, pid}: a CI run failed so).
      assert Process.whereis(Plugboard.Supervisor) == nil

      Elixir.Application.put_env(:plugboard, :bundle_required, false)
      assert {:ok, _} = Elixir.Application.ensure_all_started(:plugboard)
    end
  end

  test "a precompiled program built on another processor is named in the report and the log", %{dir: dir} do
    program = Path.join(dir, "add.mlir")
    File.write!(program, add_program())
    bundle = Path.join(dir, "precompiled")
    {out, 0} = System.cmd(cli(), ["bundle", "--target", "cpu=#{first_plugin()}", "--precompile", program, "--out", bundle], stderr_to_stdout: true)
    assert out =~ "precompiled for cpu"

    # Built here: nothing to say.
    assert {:ok, _, report} = Plugboard.boot(bundle: bundle, target: "cpu", use_environment: false)
    assert Report.candidate(report, "cpu").precompiled_mismatch == nil

    # As if built on another processor: the manifest's built_on names another one.
    manifest = Path.join(bundle, "plugboard.json")
    text = File.read!(manifest)
    assert text =~ ~s("cpu_digest")
    text = Regex.replace(~r/"cpu_digest": "[0-9a-f]{64}"/, text, ~s("cpu_digest": "#{String.duplicate("0", 64)}"))
    text = Regex.replace(~r/"cpu": "[^"]*"/, text, ~s("cpu": "Test CPU 9000"))
    text = Regex.replace(~r/"cpu_flags": "/, text, ~s("cpu_flags": "avx9000 ))
    File.write!(manifest, text)

    Elixir.Application.put_env(:plugboard, :bundle, bundle)

    try do
      log = capture_log(fn ->
        Elixir.Application.stop(:plugboard)
        assert {:ok, _} = Elixir.Application.ensure_all_started(:plugboard)
      end)

      why = Report.candidate(Plugboard.report(), "cpu").precompiled_mismatch
      assert why =~ "1 of 1 precompiled program of target cpu will not load on this host"
      assert why =~ ~s(built on "Test CPU 9000", this host is ")
      assert why =~ "features there, not here: avx9000"
      assert Plugboard.report().text =~ "precompiled: 1 of 1"
      assert log =~ "will not load on this host"
    after
      Elixir.Application.delete_env(:plugboard, :bundle)
      Elixir.Application.stop(:plugboard)
      Elixir.Application.ensure_all_started(:plugboard)
    end
  end
end
