defmodule Plugboard.ClientDropTest do
  # A client's identity and end: client_id/1 (never reused) and notify_when_dropped/3 (a message
  # once the garbage collector destroys the client resource), so that a cache keyed on a client never
  # keeps it alive. The client is held by a process of its own: when that process lets go, no term
  # of the test refers to it.
  use ExUnit.Case, async: true
  import Plugboard.TestSupport

  # Opens a client in a process of its own, which runs `setup` on it (in that process) and sends back
  # the client's id and what `setup` returned (which must not hold the client), then holds the client
  # until told :close (close/1, the term kept) or :drop (the process ends).
  defp hold_client(setup) do
    parent = self()
    plugin = first_plugin()

    holder =
      spawn(fn ->
        {:ok, c} = Plugboard.open(plugin)
        send(parent, {:held, self(), Plugboard.client_id(c), setup.(c)})
        hold(c)
      end)

    receive do
      {:held, ^holder, id, given} -> {holder, id, given}
    after
      60_000 -> flunk("the holder did not open a client")
    end
  end

  defp hold(c) do
    receive do
      :close ->
        :ok = Plugboard.close(c)
        hold(c)

      :drop ->
        :ok
    end
  end

  test "a watcher is told once the client is dropped, and not while a term refers to it" do
    me = self()
    {holder, id, nil} = hold_client(fn c -> :ok = Plugboard.notify_when_dropped(c, me, {:dropped, Plugboard.client_id(c)}); nil end)
    :erlang.garbage_collect(holder)
    :erlang.garbage_collect()
    refute_receive {:dropped, ^id}, 300
    # Closing is not the end: the term is still there.
    send(holder, :close)
    :erlang.garbage_collect(holder)
    refute_receive {:dropped, ^id}, 300
    send(holder, :drop)
    assert_receive {:dropped, ^id}, 10_000
    refute_receive {:dropped, ^id}, 200
  end

  test "executables and buffers made from the client do not keep it: a cache holding them is told" do
    me = self()

    {holder, id, {exe, x}} =
      hold_client(fn c ->
        :ok = Plugboard.notify_when_dropped(c, me, {:dropped, Plugboard.client_id(c)})
        {Plugboard.compile!(c, add_program()), Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})}
      end)

    # A cache keyed on the id, holding the executable: what plugboard_nx keeps.
    cache = %{id => exe}
    refute_receive {:dropped, ^id}, 200
    send(holder, :drop)
    assert_receive {:dropped, ^id}, 10_000
    # The native client lives on in what was made from it.
    assert [y] = Plugboard.run!(cache[id], [x, x])
    assert to_f32s(Plugboard.to_binary!(y)) == [2.0, 4.0, 6.0, 8.0]
  end

  test "every watcher is told, a watcher that exited is skipped" do
    me = self()
    gone = spawn(fn -> :ok end)
    ref = Process.monitor(gone)
    assert_receive {:DOWN, ^ref, :process, ^gone, _}

    {holder, id, nil} =
      hold_client(fn c ->
        :ok = Plugboard.notify_when_dropped(c, gone, :never_seen)
        :ok = Plugboard.notify_when_dropped(c, me, {:first, Plugboard.client_id(c)})
        :ok = Plugboard.notify_when_dropped(c, me, {:second, Plugboard.client_id(c)})
        nil
      end)

    send(holder, :drop)
    assert_receive {:first, ^id}, 10_000
    assert_receive {:second, ^id}, 10_000
  end

  test "client ids are distinct per client and stable for one, also after close" do
    {:ok, a} = Plugboard.open(first_plugin())
    {:ok, b} = Plugboard.open(first_plugin())
    ida = Plugboard.client_id(a)
    assert is_integer(ida) and ida > 0
    assert Plugboard.client_id(a) == ida
    assert Plugboard.client_id(b) != ida
    :ok = Plugboard.close(a)
    assert Plugboard.client_id(a) == ida
  end

  test "bad arguments are errors" do
    {:ok, c} = Plugboard.open(first_plugin())
    assert {:error, %Plugboard.Error{code: :invalid_argument}} = Plugboard.notify_when_dropped(c, :not_a_pid, :msg)
    assert {:error, %Plugboard.Error{code: :invalid_argument}} = Plugboard.notify_when_dropped(:nope, self(), :msg)
    assert_raise FunctionClauseError, fn -> Plugboard.client_id(:nope) end
  end
end
