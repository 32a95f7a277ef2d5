defmodule Plugboard.Report do
  @moduledoc """
  Why the booted target was chosen: every candidate considered, in order, with the stages it went
  through (found, verified, probed, dependencies, loaded, initialized, client, devices), their times,
  and why it failed or was left out. `text` is the same as a table for logs and terminals.
  """
  defmodule Stage do
    @moduledoc "One stage a candidate went through."
    @type t :: %__MODULE__{stage: atom(), passed: boolean(), ms: float(), detail: String.t()}
    defstruct [:stage, :passed, :ms, :detail]
  end

  defmodule Candidate do
    @moduledoc """
    One candidate target. `verdict` is `:chosen`, `:failed`, `:usable` (passed; another was chosen,
    or nothing was started), `:not_tried` or `:excluded` (by the policy, see `excluded_because`).

    `origin` is where it came from: `:bundle` (the bundle booted from), `:environment`
    (`PLUGBOARD_PLUGIN_PATH`, `PJRT_NAMES_AND_LIBRARY_PATHS`: outside the bundle's hashed manifest),
    `:python` (site-packages), or nil (a plugin given directly); `source` says which variable or folder.

    `precompiled_mismatch` says why the target's precompiled programs (a release's `precompile:`) will
    not load on this machine, nil when nothing says so: a CPU program compiled on another processor
    (its cache key holds the processor model and features) or under other `XLA_FLAGS` compiles again
    on first use (`exe.source == :compiled`), e.g. "1 of 1 precompiled program of target cpu will not
    load on this host and compile again on first use: they were compiled for another processor: built
    on \"A\", this host is \"B\"; features there, not here: avx512f".
    """
    @type t :: %__MODULE__{
            name: String.t(),
            platform: String.t(),
            source: String.t(),
            origin: :bundle | :environment | :python | nil,
            path: String.t(),
            verdict: :chosen | :failed | :usable | :not_tried | :excluded,
            failed_stage: atom() | nil,
            error: Plugboard.Error.t() | nil,
            excluded_because: String.t() | nil,
            isolated: boolean(),
            precompiled_mismatch: String.t() | nil,
            stages: [Plugboard.Report.Stage.t()]
          }
    defstruct [:name, :platform, :source, :origin, :path, :verdict, :failed_stage, :error, :excluded_because, :isolated,
               :precompiled_mismatch, :stages]
  end

  @type t :: %__MODULE__{
          policy: String.t(),
          chosen: String.t() | nil,
          candidates: [Candidate.t()],
          notes: [String.t()],
          text: String.t()
        }
  defstruct [:policy, :chosen, :candidates, :notes, :text]

  @doc "The candidate named `name`, or nil."
  @spec candidate(t(), String.t()) :: Candidate.t() | nil
  def candidate(%__MODULE__{candidates: candidates}, name), do: Enum.find(candidates, &(&1.name == name))

  @doc "One line per candidate that was not chosen: why (for logs)."
  @spec skipped(t()) :: [String.t()]
  def skipped(%__MODULE__{candidates: candidates}) do
    for c <- candidates, c.verdict != :chosen do
      why =
        case c do
          %{verdict: :failed, failed_stage: stage, error: error} ->
            "failed at #{stage}: #{error && Exception.message(error)}"

          %{verdict: :excluded, excluded_because: because} ->
            "excluded: #{because}"

          %{verdict: verdict} ->
            to_string(verdict) |> String.replace("_", " ")
        end

      "#{c.name} [#{c.platform}] #{why}"
    end
  end
end
