defmodule Compute do
  @moduledoc """
  The part of the sample that runs programs on an accelerator: its release (`compute`) carries the
  cpu, cuda13 and rocm7 targets and boots whichever this machine can run. See `Compute.Demo`.
  """

  @doc "The target the release booted (nil when plugboard did not boot)."
  @spec target() :: String.t() | nil
  def target, do: Plugboard.report() && Plugboard.report().chosen
end
