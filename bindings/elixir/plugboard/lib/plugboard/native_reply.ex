defmodule Plugboard.NativeReply do
  @moduledoc false
  # Waiting for what the NIF sends a caller (a compile's outcome, a buffer's bytes, an execution's
  # outcome and calls): what a caller that stops waiting does.
  alias Plugboard.{Error, Native}

  # The caller stops waiting: nothing more is sent for `ref` (its pending host calls fail), and what
  # was sent already leaves the mailbox. An outcome that arrived meanwhile is still the answer.
  def give_up(gate, ref, outcome_tag, message) do
    :ok = Native.cancel(gate)

    result =
      receive do
        {^outcome_tag, ^ref, outcome} -> outcome
      after
        0 -> {:error, Error.new(:deadline_exceeded, message)}
      end

    flush(ref)
    result
  end

  def flush(ref) do
    receive do
      {tag, ^ref, _} when tag in [:plugboard_call, :plugboard_ordered, :plugboard_done, :plugboard_compiled, :plugboard_binary] ->
        flush(ref)
    after
      0 -> :ok
    end
  end

end
