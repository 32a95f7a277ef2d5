defmodule Plugboard.HostMemoryTest do
  # A CPU plugin's executions reuse the VM's heap for their buffers: an output of a MiB, dropped before
  # the next run, does not cost a fresh mapping and a page fault per 4 KiB each time (c_src/host_memory.h).
  # Not async: page faults are counted for the whole OS process.
  use ExUnit.Case, async: false
  # What it checks is glibc's malloc, as the NIF tunes it: under ASan (scripts/test_elixir.sh
  # --sanitize) ASan's allocator replaces glibc's and this module is excluded by its tag.
  @moduletag :glibc_malloc
  import Plugboard.TestSupport

  @runs 200
  @pages_per_output div(512 * 512 * 4, 4096)

  for {label, plugin} <- cpu_plugins() do
    test "runs with a MiB output fault far fewer pages than the output has, on #{label}" do
      {:ok, client} = Plugboard.open(unquote(plugin))
      exe = Plugboard.compile!(client, add_program(:f32, [512, 512]), compile_cache: false)
      x = Plugboard.buffer!(client, f32s(List.duplicate(1.0, 512 * 512)), :f32, {512, 512}, copy: true)
      run = fn -> [y] = Plugboard.run!(exe, [x, x]); Plugboard.free(y) end
      for _ <- 1..10, do: run.()

      before = minor_faults()
      for _ <- 1..@runs, do: run.()
      per_run = (minor_faults() - before) / @runs

      # Mapped afresh, each output would fault all of its #{@pages_per_output} pages.
      assert per_run < @pages_per_output / 8, "#{per_run} page faults a run (an output has #{@pages_per_output} pages)"
    end
  end

  # This OS process's minor page faults so far (/proc/self/stat's minflt).
  defp minor_faults do
    [_, fields] = "/proc/self/stat" |> File.read!() |> String.split(") ", parts: 2)
    fields |> String.split() |> Enum.at(7) |> String.to_integer()
  end
end
