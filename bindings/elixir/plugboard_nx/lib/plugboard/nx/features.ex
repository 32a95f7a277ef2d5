defmodule Plugboard.Nx.Features do
  @moduledoc """
  What the Nx that plugboard_nx runs with provides, decided by its modules and functions, never by its
  version string (Nx's main branch says 0.13.1 until a release bumps it).

    * `io_call?/0` — the side-effect node is `:io_call` (`Nx.Defn.Expr.io_call/2`, `Nx.io_call/2,3`,
      Nx 1.0); otherwise it is `:hook` (`Nx.Defn.Expr.hook/2`, Nx 0.13). The emitter lowers both
      (their arguments are the same), so this decides only which node plugboard_nx itself builds
      (`Plugboard.Nx.runtime_cast/3`).
    * `tokens?/0` — `Nx.Defn.Token` (`create_token`, `hook_token`, `attach_token`, and the
      `{:token_hook, ...}` callback spec; gone in Nx 1.0).

  Each is answered at compile time too, so that code written against only one Nx compiles against
  either without warnings about the other's functions.
  """

  @doc "Whether Nx has `io_call` (Nx 1.0's side-effect node)."
  def io_call?, do: Code.ensure_loaded?(Nx) and function_exported?(Nx, :io_call, 2)

  @doc "Whether Nx has `Nx.Defn.Token` (hook tokens, Nx 0.13)."
  def tokens?, do: Code.ensure_loaded?(Nx.Defn.Token)
end
