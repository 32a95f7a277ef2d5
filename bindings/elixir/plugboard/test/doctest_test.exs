defmodule Plugboard.DoctestTest do
  # The examples in the modules' docs, run as doctests on a target the application boots, as a
  # release's would: a bundle of the first CPU plugin, configured, then the application restarted
  # (and restored after: the other tests expect no booted target). Not async: the boot is global.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport

  setup_all do
    dir = Path.join(System.tmp_dir!(), "plugboard-doctest-#{System.unique_integer([:positive])}")
    bundle = make_bundle(Path.join(dir, "bundle"), cpu: first_plugin())
    Application.put_env(:plugboard, :bundle, bundle)
    :ok = Application.stop(:plugboard)
    {:ok, _} = Application.ensure_all_started(:plugboard)

    on_exit(fn ->
      Application.delete_env(:plugboard, :bundle)
      Application.stop(:plugboard)
      Application.ensure_all_started(:plugboard)
      File.rm_rf!(dir)
    end)

    :ok
  end

  doctest Plugboard
  doctest Plugboard.Clients
  doctest Plugboard.Compilation
  doctest Plugboard.Buffers
  doctest Plugboard.Execution
  doctest Plugboard.Trace
  doctest Plugboard.KeyValueStore
end
