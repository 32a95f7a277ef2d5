defmodule Plugboard.Nx.IoCallFixtures.Io do
  @moduledoc false
  # `io(x, name_or_fun)` and `io(x, name, fun)` inside defn: Nx 1.0's io_call where the Nx in use has
  # it, else Nx 0.13's hook (a node with the same arguments), so that test/io_call_test.exs runs on
  # both. A macro: defn keeps the callbacks of Nx.Defn.Kernel's own io_call/hook calls as Elixir code.
  @side_effect if Plugboard.Nx.Features.io_call?(), do: :io_call, else: :hook

  defmacro io(x, name_or_fun), do: quote(do: Nx.Defn.Kernel.unquote(@side_effect)(unquote(x), unquote(name_or_fun)))
  defmacro io(x, name, fun), do: quote(do: Nx.Defn.Kernel.unquote(@side_effect)(unquote(x), unquote(name), unquote(fun)))
end

defmodule Plugboard.Nx.IoCallFixtures do
  @moduledoc false
  # Side effects for test/io_call_test.exs.
  import Nx.Defn
  import Plugboard.Nx.IoCallFixtures.Io

  # Three side effects in program order: a function, a named one with a function, and a named one
  # without (optional: called only where `hooks:` binds it).
  defn several(x) do
    a = io(x * 2, fn t -> send(self(), {:first, t}) end)
    b = io(a + 1, :second, fn t -> send(self(), {:second, t}) end)
    c = io(b * 10, :optional)
    {a, c}
  end

  # In a loop's condition (each test) and body (each iteration), between two outside it.
  defn looped(x) do
    a = io(x, :before, fn t -> send(self(), {:before, t}) end)

    {_, n} =
      while {i = 0, n = a}, io(i, :test, fn t -> send(self(), {:test, t}) end) < 3 do
        {i + 1, io(n + 1, :body, fn t -> send(self(), {:body, t}) end)}
      end

    io(n * 10, :after, fn t -> send(self(), {:after, t}) end)
  end

  # In both branches of a cond: only the taken one's is called.
  defn branched(x) do
    if Nx.sum(x) > 0 do
      io(x, :positive, fn t -> send(self(), {:positive, t}) end)
    else
      io(-x, :negative, fn t -> send(self(), {:negative, t}) end)
    end
  end

  # On a tuple and on a map, whose tensors go on through the side effect.
  defn containers(x) do
    {a, b} = io({x, x + 1}, fn {p, q} -> send(self(), {:tuple, p, q}) end)
    m = io(%{"w" => a * 2, "b" => b}, fn m -> send(self(), {:map, m["w"], m["b"]}) end)
    m["w"] + m["b"]
  end

  # The second side effect raises: the third must not be called.
  defn raising(x) do
    a = io(x + 1, :first, fn t -> send(self(), {:first, t}) end)
    b = io(a * 2, fn _ -> raise ArgumentError, "io_call failed on purpose" end)
    io(b + 1, :last, fn t -> send(self(), {:last, t}) end)
  end

  # A raising side effect in a program that also waits for a runtime call (its callbacks run as a
  # runtime call's function does).
  defn raising_with_runtime_call(x) do
    a = io(x, fn _ -> throw(:io_call_thrown) end)
    Nx.runtime_call(x, a + 1, [], &__MODULE__.echo/2)
  end

  def echo(t, _opts), do: t

  defn printed(x) do
    y = print_value(x * 2, label: "doubled")
    print_expr(y + 1, label: "traced")
  end

  # Nx.Serving's streaming hooks: named side effects without callbacks.
  defn served(x) do
    d = io(x * 2, :double)
    io(d + 10, :plus_ten)
  end
end
