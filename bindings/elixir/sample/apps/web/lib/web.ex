defmodule Web do
  @moduledoc "The front of the sample: it would take requests and hand compute work to the `compute` release."

  @doc "A greeting, to show the release runs."
  @spec hello() :: String.t()
  def hello, do: "web up"
end

defmodule Web.Application do
  @moduledoc false
  use Application

  @impl true
  def start(_type, _args), do: Supervisor.start_link([], strategy: :one_for_one, name: Web.Supervisor)
end
