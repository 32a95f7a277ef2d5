# The real CPU plugins come from PLUGBOARD_TEST_PLUGINS (colon-separated) or the files scripts/setup.sh
# extracted (PLUGBOARD_DEPS_DIR).
for {_, p} <- Plugboard.Nx.Case.cpu_plugins(), not File.exists?(p), do: raise("test plugin #{p} is missing: run scripts/setup.sh")
ExUnit.start()
