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
    :persistent_term.put({Plugboard.Native, :load_error}, error)

    try do
      log = capture_log(fn -> assert {:error, {:plugboard_nif_not_loaded, msg}} = Plugboard.Application.start(:normal, []); assert msg == error.message end)
      assert log =~ "plugboard: cannot load /x/plugboard_nif.so: libzip.so.4 not found on this host (...)"
      if booted == nil, do: assert(Plugboard.client() == {:error, error})
    after
      :persistent_term.erase({Plugboard.Native, :load_error})
    end

    assert Plugboard.Native.load_error() == nil
  end
end
