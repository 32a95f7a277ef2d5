defmodule Plugboard.Nx.Application do
  @moduledoc false
  # Owns the table of compiled programs (Plugboard.Nx.Cache).
  use Application

  @impl true
  def start(_type, _args) do
    Supervisor.start_link([Plugboard.Nx.Cache], strategy: :one_for_one, name: Plugboard.Nx.Supervisor)
  end
end
