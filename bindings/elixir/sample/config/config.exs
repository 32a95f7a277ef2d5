import Config

# Which embedded target boots: by default the bundle's priorities (accelerators before CPU); at run
# time PLUGBOARD_TARGET=cuda13 (that one or fail) or PLUGBOARD_TARGETS=cuda13,cpu (fall back in order),
# or here: config :plugboard, targets: ["cuda13", "cpu"].
config :logger, :console, format: "$time [$level] $message\n"
