defmodule Plugboard.NativeLoadTest do
  # A NIF that cannot load on this host (issue 33): one line naming every missing library and what to
  # do, and the application's start stops with it. Sets the recorded load error for a moment: not async.
  use ExUnit.Case, async: false
  import ExUnit.CaptureLog

  @moduletag :tmp_dir
  @missing ["libplugboard_test_missing.so.9", "libplugboard_test_other.so.3"]
  @advice "PLUGBOARD_BUILD=true mix compile"

  # A copy of the real NIF (beside a copy of libplugboard, as in priv/lib) with NEEDED entries for
  # `needs`, libraries no host has.
  defp broken_nif(dir, needs) do
    patchelf =
      System.find_executable("patchelf") ||
        flunk("patchelf is needed to make a NIF that cannot load (apt-get install patchelf)")

    lib = Path.join(:code.priv_dir(:plugboard), "lib")
    so = Path.join(dir, "plugboard_nif.so")
    File.cp!(Path.join(lib, "plugboard_nif.so"), so)
    File.cp!(Path.join(lib, "libplugboard.so.0"), Path.join(dir, "libplugboard.so.0"))

    for needed <- needs do
      {out, status} = System.cmd(patchelf, ["--add-needed", needed, so], stderr_to_stdout: true)
      assert status == 0, "patchelf --add-needed #{needed}: #{out}"
    end

    so
  end

  # What :erlang.load_nif/2 says for `so`. It loads only for the module that calls it, and a loaded
  # Plugboard.Native refuses a second library: a module made here asks.
  defp load_nif(so) do
    name = Module.concat(__MODULE__, "Probe#{System.unique_integer([:positive])}")

    [{^name, _}] =
      Code.compile_quoted(
        quote do
          defmodule unquote(name) do
            def load(path), do: :erlang.load_nif(path, 0)
          end
        end
      )

    result = name.load(so |> Path.rootname(".so") |> String.to_charlist())
    :code.delete(name)
    :code.purge(name)
    result
  end

  test "a NIF whose libraries are missing: one line naming all of them and what to do", %{tmp_dir: dir} do
    so = broken_nif(dir, @missing)
    assert {:error, {:load_failed, _} = reason} = load_nif(so)
    # load_nif names only the first; the loader's trace finds both.
    assert Enum.sort(Plugboard.Native.missing_libraries(so)) == Enum.sort(@missing)

    error = Plugboard.Native.load_failure(so, reason)
    assert %Plugboard.Error{code: :failed_precondition, message: message} = error
    refute message =~ "\n"
    assert message =~ "cannot load #{so}: "
    for lib <- @missing, do: assert(message =~ lib)
    assert message =~ "not found on this host (the native part must be self-contained; install them, or build the native part on this host with #{@advice})"
  end

  test "one missing library: named, with what to do", %{tmp_dir: dir} do
    so = broken_nif(dir, ["libplugboard_test_missing.so.9"])
    {:error, reason} = load_nif(so)

    assert Plugboard.Native.load_failure(so, reason).message ==
             "cannot load #{so}: libplugboard_test_missing.so.9 not found on this host (the native part must be " <>
               "self-contained; install it, or build the native part on this host with #{@advice})"
  end

  test "a failure of another kind keeps load_nif's reason, on one line" do
    reason = {:bad_lib, ~c"Library version (9.9) not compatible\nwith this VM"}
    message = Plugboard.Native.load_failure("/x/plugboard_nif.so", reason).message
    assert message == "cannot load /x/plugboard_nif.so: Library version (9.9) not compatible; with this VM (build the native part on this host with #{@advice})"
    # Without the loader's trace (the file is not there), the library load_nif named.
    reason = {:load_failed, ~c"Failed to load NIF library /x/plugboard_nif: 'libzip.so.4: cannot open shared object file: No such file or directory'"}
    assert Plugboard.Native.load_failure("/x/plugboard_nif.so", reason).message =~ "cannot load /x/plugboard_nif.so: libzip.so.4 not found on this host"
  end

  test "a recorded load error stops the application's start with that line, and client/0 returns it" do
    error = Plugboard.Error.new(:failed_precondition, "cannot load /x/plugboard_nif.so: libzip.so.4 not found on this host (...)")
    booted = :persistent_term.get({Plugboard, :boot}, nil)
    state = {Plugboard.Native, :load_state}
    before = :persistent_term.get(state, nil)
    assert before == :loaded
    :persistent_term.put(state, {:error, error})

    try do
      assert Plugboard.Native.load_error() == error
      log = capture_log(fn -> assert {:error, {:plugboard_nif_not_loaded, msg}} = Plugboard.Application.start(:normal, []); assert msg == error.message end)
      assert log =~ "plugboard: cannot load /x/plugboard_nif.so: libzip.so.4 not found on this host (...)"
      if booted == nil, do: assert(Plugboard.client() == {:error, error})
    after
      :persistent_term.put(state, before)
    end

    assert Plugboard.Native.load_error() == nil
  end

  # Plugboard.Native's own source compiled as another module: the NIF (made for Plugboard.Native)
  # refuses to load for it, which is a NIF that cannot load, with the rest as it is (its state is its
  # own persistent term). Returns the module and its object code.
  defp native_copy do
    name = Module.concat(__MODULE__, "NativeCopy#{System.unique_integer([:positive])}")
    source = File.read!(Plugboard.Native.module_info(:compile)[:source])
    copy = String.replace(source, "defmodule Plugboard.Native do", "defmodule #{inspect(name)} do", global: false)
    refute copy == source
    [{^name, binary}] = Code.compile_string(copy, "native_copy.ex")
    {name, binary}
  end

  defp unload(name) do
    :code.purge(name)
    :code.delete(name)
    :code.purge(name)
    :persistent_term.erase({name, :load_state})
  end

  defp load(name, binary), do: :code.load_binary(name, ~c"native_copy.ex", binary)

  test "a NIF that cannot load leaves the module loaded: every function answers the reason, version/0 raises it" do
    {name, _binary} = native_copy()

    try do
      assert %Plugboard.Error{code: :failed_precondition, message: message} = error = name.load_error()
      assert message =~ "cannot load #{:code.priv_dir(:plugboard)}/lib/plugboard_nif.so: "
      assert name.discover(%{}) == {:error, error}
      assert name.resource_counts() == {:error, error}
      assert assert_raise(Plugboard.Error, fn -> name.version() end) == error
    after
      unload(name)
    end
  end

  test "a first load after the module was deleted loads it whatever an earlier load did; a hot upgrade is refused only over a working NIF" do
    {name, binary} = native_copy()
    state = {name, :load_state}

    try do
      first = name.load_error()
      assert %Plugboard.Error{} = first

      # The module's NIF had loaded (as Plugboard.Native's does), then the module was deleted: a new
      # first load whose NIF fails loads the module all the same, answering the reason (not undef).
      :persistent_term.put(state, :loaded)
      :code.purge(name)
      assert :code.delete(name)
      :code.purge(name)
      refute :erlang.module_loaded(name)
      assert {:module, ^name} = load(name, binary)
      assert name.load_error() == first
      assert name.discover(%{}) == {:error, first}

      # A hot upgrade over code whose NIF works is refused: the current code stays, and so does the state.
      :persistent_term.put(state, :loaded)
      assert {:error, :on_load_failure} = load(name, binary)
      assert :erlang.module_loaded(name)
      assert :persistent_term.get(state) == :loaded

      # Over code whose NIF did not load either, the upgrade loads, answering its own reason.
      stale = Plugboard.Error.new(:failed_precondition, "an earlier reason")
      :persistent_term.put(state, {:error, stale})
      assert {:module, ^name} = load(name, binary)
      assert name.load_error() == first
      assert name.discover(%{}) == {:error, first}
    after
      unload(name)
    end
  end

  defp running(marker) do
    for dir <- Path.wildcard("/proc/[0-9]*"),
        {:ok, cmdline} <- [File.read(Path.join(dir, "cmdline"))],
        cmdline =~ marker,
        do: dir
  end

  test "the dynamic loader's trace is bounded: a program that runs past its time is killed" do
    assert Plugboard.Native.run_bounded("/bin/sh", ["-c", "echo $PB_X; echo oops >&2; exit 3"], [{"PB_X", "hi"}], 5_000) ==
             {"hi\noops\n", 3}

    marker = "31.#{System.unique_integer([:positive])}"
    t0 = System.monotonic_time(:millisecond)
    assert Plugboard.Native.run_bounded("/bin/sh", ["-c", "exec sleep #{marker}"], [], 300) == :timeout
    assert System.monotonic_time(:millisecond) - t0 < 3_000
    # The program itself is gone (killed, not only its pipes closed).
    assert Enum.any?(1..50, fn _ -> running(marker) == [] or (Process.sleep(20) && false) end), "sleep #{marker} still runs"
    assert Plugboard.Native.run_bounded("/nonexistent/loader", [], [], 1_000) == :error
  end
end
