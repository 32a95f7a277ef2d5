defmodule Plugboard.UpgradeTest do
  # A hot code upgrade of Plugboard.Native (the NIF's upgrade callback): alone (async: false), since
  # purging the old code would stop a process running in it.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport

  test "the NIF survives a hot code upgrade; what the old code made keeps working" do
    {:ok, c} = Plugboard.open(first_plugin())
    x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
    {module, binary, file} = :code.get_object_code(Plugboard.Native)
    :code.soft_purge(module)
    assert {:module, Plugboard.Native} = :code.load_binary(module, file, binary)
    # The old code is still loaded beside the new one (old and current): both libraries share the
    # resource types the new one took over.
    assert to_f32s(Plugboard.to_binary!(x)) == [1.0, 2.0, 3.0, 4.0]
    exe = Plugboard.compile!(c, add_program())
    assert [y] = Plugboard.run!(exe, [x, x])
    assert to_f32s(Plugboard.to_binary!(y)) == [2.0, 4.0, 6.0, 8.0]
    assert :code.soft_purge(module)
    assert to_f32s(Plugboard.to_binary!(y)) == [2.0, 4.0, 6.0, 8.0]
  end

  test "client ids go on and watchers registered before an upgrade are told after it" do
    me = self()

    holder =
      spawn(fn ->
        {:ok, c} = Plugboard.open(first_plugin())
        :ok = Plugboard.notify_when_dropped(c, me, {:dropped, Plugboard.client_id(c)})
        send(me, {:id, Plugboard.client_id(c)})
        receive do: (:drop -> :ok)
      end)

    assert_receive {:id, id}, 60_000
    {module, binary, file} = :code.get_object_code(Plugboard.Native)
    :code.soft_purge(module)
    assert {:module, Plugboard.Native} = :code.load_binary(module, file, binary)
    {:ok, later} = Plugboard.open(first_plugin())
    assert Plugboard.client_id(later) > id
    send(holder, :drop)
    assert_receive {:dropped, ^id}, 10_000
    assert :code.soft_purge(module)
  end

  # A real upgrade: the new code's NIF is a second library, a copy of the .so under another path
  # (dlopen gives the same handle for the same path, or the same file, so reloading the one .so runs
  # the upgrade callback against its own statics and cannot tell whether anything is handed over).
  # The copy is put where the new code's on_load looks (the :plugboard application's priv/lib): an
  # application folder of its own, first in the code path while the module loads.
  defp upgrade_to_a_copy_of_the_nif do
    priv_lib = Path.join(to_string(:code.priv_dir(:plugboard)), "lib")
    root = Path.join(System.tmp_dir!(), "plugboard-upgrade-#{System.unique_integer([:positive])}")
    # Removed after the test: the library stays mapped while loaded.
    on_exit(fn -> File.rm_rf!(root) end)
    app = Path.join(root, "plugboard")
    copy_lib = Path.join(app, "priv/lib")
    File.mkdir_p!(copy_lib)
    File.mkdir_p!(Path.join(app, "ebin"))
    # The NIF copied (a distinct file); what it links against links to the files in use.
    for file <- File.ls!(priv_lib) do
      if file == "plugboard_nif.so",
        do: File.cp!(Path.join(priv_lib, file), Path.join(copy_lib, file)),
        else: File.ln_s!(Path.join(priv_lib, file), Path.join(copy_lib, file))
    end

    {module, binary, file} = :code.get_object_code(Plugboard.Native)
    :code.soft_purge(module)
    true = :code.add_patha(to_charlist(Path.join(app, "ebin")))

    try do
      assert {:module, Plugboard.Native} = :code.load_binary(module, file, binary)
    after
      :code.del_path(to_charlist(Path.join(app, "ebin")))
    end

    copy = Path.join(copy_lib, "plugboard_nif.so")
    assert File.read!("/proc/self/maps") =~ copy, "the new code's NIF is not the copy #{copy}"
    module
  end

  test "an upgrade to a second build of the NIF: the new library takes over what the old one made" do
    me = self()
    {:ok, c} = Plugboard.open(first_plugin())
    x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
    id = Plugboard.client_id(c)

    holder =
      spawn(fn ->
        {:ok, held} = Plugboard.open(first_plugin())
        :ok = Plugboard.notify_when_dropped(held, me, {:dropped, Plugboard.client_id(held)})
        y = Plugboard.buffer!(held, f32s([5, 6, 7, 8]), :f32, {4})
        send(me, {:held, Plugboard.client_id(held)})
        receive do: (:read -> send(me, {:read, Plugboard.to_binary(y)}))
        receive do: (:drop -> :ok)
      end)

    assert_receive {:held, held_id}, 60_000
    module = upgrade_to_a_copy_of_the_nif()

    # What the old library made works with the new one's functions.
    assert to_f32s(Plugboard.to_binary!(x)) == [1.0, 2.0, 3.0, 4.0]
    exe = Plugboard.compile!(c, add_program())
    assert [z] = Plugboard.run!(exe, [x, x])
    assert to_f32s(Plugboard.to_binary!(z)) == [2.0, 4.0, 6.0, 8.0]
    send(holder, :read)
    assert_receive {:read, {:ok, y}}, 10_000
    assert to_f32s(y) == [5.0, 6.0, 7.0, 8.0]
    # Client ids go on from the old library's counter.
    {:ok, later} = Plugboard.open(first_plugin())
    assert Plugboard.client_id(later) > max(id, held_id)
    # A watcher registered with the old library is told when the new one destroys the client (and
    # its buffer).
    send(holder, :drop)
    assert_receive {:dropped, ^held_id}, 10_000
    assert :code.soft_purge(module)
    # The old library's objects, destroyed by the new one, are counted where they were counted.
    :erlang.garbage_collect()
    counts = Plugboard.native_objects()
    assert Enum.all?(counts, fn {_, n} -> n >= 0 end), "negative live counts: #{inspect(counts)}"
    assert Plugboard.Native.await_teardowns(10_000) == :ok
  end
end
