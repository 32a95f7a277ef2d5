# The dispatch guard's budget: reductions of the calling process per call (BEAM reductions: the
# function, BIF and NIF calls it makes; a count that does not depend on the machine's load) on the
# paths below, with telemetry as the :plugboard application starts it (on, with the summary, where
# :telemetry is loaded: the Elixir 1.18 pass; absent on Debian's Elixir 1.14). Checked by
# plugboard's test/dispatch_budget_test.exs and plugboard_nx's test/dispatch_budget_test.exs
# (dispatch_budget_check.exs): a figure over its budget by more than `margin` fails the test.
#
# To record the figures of a toolchain (or after a change meant to cost more), run the two tests
# with PLUGBOARD_DISPATCH_RECORD=1 and put the printed lines here. To see where a call's reductions
# go: OTP's call counter around 1000 calls (Mix.ensure_application!(:tools); :cprof.start(); the
# calls; :cprof.pause(); :cprof.analyse(0)), before and after the change.
%{
  command:
    "PLUGBOARD_DISPATCH_RECORD=1 mix test test/dispatch_budget_test.exs (in bindings/elixir/plugboard and in bindings/elixir/plugboard_nx, " <>
      "with the environment scripts/test_elixir.sh gives each pass); put the printed lines in bindings/elixir/dispatch_budget.exs",
  margin: 0.03,
  paths: %{
    run: %{
      path: "Plugboard.run!/2 of x + 1 (f32[4], launched inline): Plugboard.run!/3's delegate to Plugboard.Execution, its run/3's fast clause, start/9, Plugboard.Native.execute/8, await/2, Plugboard.Telemetry's run_events? check",
      # The same on the three CPU plugins: 17.2-17.4 since Plugboard became a facade delegating to one
      # module per concern (issue 37: the delegate is one call more, 16.2-16.4 before). 47.3 with
      # telemetry before the per-run events became opt-in and the NIF took over the summary's run
      # counts (issue 36). On Elixir 1.14 a fresh clone's CI once measured 0.3 over this machine's top:
      # the figures are recorded at their local top.
      figures: [
        {[otp: "25", elixir: "1.18", telemetry: true], 17.4},
        {[otp: "25", elixir: "1.14", telemetry: false], 17.4}
      ]
    },
    jit: %{
      path: "a cached Nx.Defn.jit call of x + 1 (f32[4], argument on the device): Nx.Defn's jit, Plugboard.Nx.__jit__/5 (client, options, Cache.key/4, the cache hit read from :persistent_term and counted), the run closure, Plugboard.run!",
      # The largest of the three CPU plugins (242.0 to 245.0). 290.9 at issue 36's start; issue 35's
      # later run path (donation, hooks:, merged in) took it to 295.3-297.2, issue 36's one
      # Plugboard.Trace.enabled?/0 per jit (2 calls, :cprof) to 299.9-300.6, the per-run events made
      # opt-in (the NIF counting runs) to 264.3-267.4, and the cache hit read from :persistent_term
      # (no ETS copy), its event made a run event, the client's id read from its struct and one
      # output without a traversal down to this. A first traced version that handed the run a map
      # of what it needs instead of a closure measured 302.7-305.4.
      # Nx's main branch (nx_source: "path", PLUGBOARD_NX_PATH; its mix.exs says 0.13.1 as well): 246.3
      # to 248.7 (277.6-281.0 before the same change), its own jit path being longer. (Before
      # nx_source, both shared one key: the main branch's run passed under 300.6 + 3% and failed
      # under 267.4 + 3%.)
      figures: [
        {[otp: "25", elixir: "1.18", telemetry: true, nx: "0.13.1", nx_source: "hex"], 245.0},
        {[otp: "25", elixir: "1.18", telemetry: true, nx: "0.13.1", nx_source: "path"], 248.7}
      ]
    }
  }
}
