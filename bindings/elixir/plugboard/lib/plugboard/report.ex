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

  @doc """
  `text` as it may be printed on a terminal or written to a log: every control character spelled
  out (C0 controls and DEL as `\\n`, `\\t`, `\\r`, `\\e` or `\\xNN`, the C1 controls as `\\u0080`..`\\u009f`,
  bytes that are not UTF-8 as `\\xNN`), everything else unchanged: a target name, a path or a reason
  from the environment, a manifest or a plugin cannot clear the screen or start a forged log line.
  The same spelling as the C++ reports (`base/terminal_text.h`). Anything but a binary goes through
  `to_string/1` first.
  """
  @spec terminal_safe(term()) :: String.t()
  def terminal_safe(text) when is_binary(text), do: text |> spell([]) |> IO.iodata_to_binary()
  def terminal_safe(text), do: text |> to_string() |> terminal_safe()

  defp spell(<<>>, acc), do: Enum.reverse(acc)
  defp spell(<<?\n, rest::binary>>, acc), do: spell(rest, ["\\n" | acc])
  defp spell(<<?\t, rest::binary>>, acc), do: spell(rest, ["\\t" | acc])
  defp spell(<<?\r, rest::binary>>, acc), do: spell(rest, ["\\r" | acc])
  defp spell(<<0x1B, rest::binary>>, acc), do: spell(rest, ["\\e" | acc])
  defp spell(<<c, rest::binary>>, acc) when c < 0x20 or c == 0x7F, do: spell(rest, [hex("\\x", c) | acc])
  defp spell(<<c, rest::binary>>, acc) when c < 0x80, do: spell(rest, [c | acc])
  # A C1 control (U+0080..U+009F), which some terminals obey as CSI and kin.
  defp spell(<<c::utf8, rest::binary>>, acc) when c <= 0x9F, do: spell(rest, [hex("\\u00", c) | acc])
  defp spell(<<c::utf8, rest::binary>>, acc), do: spell(rest, [<<c::utf8>> | acc])
  defp spell(<<c, rest::binary>>, acc), do: spell(rest, [hex("\\x", c) | acc])

  defp hex(prefix, byte), do: prefix <> (byte |> Integer.to_string(16) |> String.downcase() |> String.pad_leading(2, "0"))

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
