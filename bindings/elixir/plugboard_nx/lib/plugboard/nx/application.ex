defmodule Plugboard.Nx.Application do
  @moduledoc false
  # Owns the table of compiled programs (Plugboard.Nx.Cache).
  use Application

  @impl true
  def start(_type, _args) do
    Plugboard.Nx.Cache.init()
    Supervisor.start_link([], strategy: :one_for_one, name: Plugboard.Nx.Supervisor)
  end
end
