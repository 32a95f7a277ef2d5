# The real CPU plugins come from PLUGBOARD_TEST_PLUGINS (colon-separated paths) or, by default, from
# the files scripts/setup.sh extracted; the fault plugins from PLUGBOARD_FAULT_DIR (build/tests).
Plugboard.TestSupport.check_environment!()
ExUnit.start(capture_log: true)
