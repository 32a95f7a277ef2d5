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
end
