defmodule Plugboard.Nx.Application do
  @moduledoc false
  # Owns the table of compiled programs (Plugboard.Nx.Cache) and this node's serving router
  # (Plugboard.Serving.Router: what this node knows of the cluster's serving members).
  use Application

  @impl true
  def start(_type, _args) do
    Supervisor.start_link([Plugboard.Nx.Cache, Plugboard.Serving.Router], strategy: :one_for_one, name: Plugboard.Nx.Supervisor)
  end
end
