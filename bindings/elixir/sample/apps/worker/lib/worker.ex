defmodule Worker do
  @moduledoc "Background jobs of the sample; it needs no accelerator, so its release carries no plugin."

  @doc "A greeting, to show the release runs."
  @spec hello() :: String.t()
  def hello, do: "worker up"
end

defmodule Worker.Application do
  @moduledoc false
  use Application

  @impl true
  def start(_type, _args), do: Supervisor.start_link([], strategy: :one_for_one, name: Worker.Supervisor)
end
