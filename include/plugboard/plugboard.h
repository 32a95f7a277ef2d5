/// \file
/// plugboard's embedding API: everything an application or a language binding (the Elixir NIF)
/// includes. It pulls in no PJRT, probe, isolation or verification header; the library's layers stay
/// behind it.
///
/// \code
///   auto boot = plugboard::api::boot();                 // choose a target, as the environment says
///   if (!boot || !boot->client) ...                      // boot->report says why, per candidate
///   auto program = plugboard::api::Program::from_file("model.mlir");
///   auto exe = boot->client->compile(*program);
///   auto x = boot->client->copy_to_device(bytes, plugboard::DType::kF32, dims);
///   plugboard::api::Buffer* args[] = {&*x};
///   auto run = exe->execute(args);
///   run->on_complete([](plugboard::Status s) { /* enif_send, not a blocked scheduler */ });
/// \endcode
///
/// Every function is noexcept: failures, allocation failures included, come back as Error values
/// (code, message naming the file, plugin or argument, and the context it came through).
///
/// Threads. Client, Program, Executable and HostCallbacks are handles: copies share one object, and
/// every method may be called from any number of threads at once. Buffer and Execution are owned by
/// one holder at a time (move-only); distinct ones may be used on distinct threads freely, and
/// reading one Buffer (to_host, its metadata) from several threads at once is safe. Functions
/// handed to the library run on its threads, never under its locks:
/// - on_complete and Buffer::to_host_async's `done`: a delivery thread (shared by the process);
/// - compile_async's `done`: a compile thread;
/// - ordered host callbacks: a delivery thread, one call at a time per receiver, in program order
/// (or a thread that waits for them: await(), or a later blocking call of the same receiver,
/// runs what is still queued rather than sleep);
/// - blocking host callbacks: the plugin's thread that runs the program;
/// - view_of_device_memory's `on_release`: the thread on which the plugin lets go of the memory (a
/// plugin thread, or the one destroying the view); it must only release, never call the library.
///
/// None of them may wait for an execution: await() there is FAILED_PRECONDITION (it would wait for
/// the very thread it runs on); use on_complete.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "plugboard/dtype.h"
#include "plugboard/host_array.h"
#include "plugboard/host_call.h"
#include "plugboard/key_value_store.h"
#include "plugboard/status.h"

#if defined(PLUGBOARD_BUILDING_LIBRARY)
#define PLUGBOARD_API __attribute__((visibility("default")))
#else
#define PLUGBOARD_API
#endif

namespace plugboard::api {

/// The library's version ("0.1.0").
PLUGBOARD_API const char* version() noexcept;

// ---------------------------------------------------------------------------------------------
// Selection: which plugin a process runs on, and why.

/// How candidates are found and judged; the same for discover() and boot().
struct SelectionSettings {
  /// A bundle folder (plugboard.json with its plugins), whose targets come first. Either way the
  /// environment's candidates follow when use_environment is set.
  std::optional<std::filesystem::path> bundle;
  /// Read PLUGBOARD_PLUGIN_PATH / PJRT_NAMES_AND_LIBRARY_PATHS for candidates, and PLUGBOARD_TARGET,
  /// PLUGBOARD_TARGETS, PLUGBOARD_PROBES, PLUGBOARD_ISOLATE for the policy (what is set here wins).
  /// A boot() with false that succeeds also stops PLUGBOARD_LAPACK being read, for the process and for
  /// good (LAPACK is then liblapack.so.3 from the loader's path; a CPU boot's report notes name it;
  /// the boot does not open it).
  bool use_environment = true;
  std::optional<std::string> target;  ///< explicit: that one or fail
  std::vector<std::string> preference;  ///< ordered fallback; empty: by priority (accelerators first)
  std::optional<bool> probes;  ///< device probes before loading (default on)
  std::optional<bool> isolate;  ///< try loading in a child process first (default off)
  /// Where target/preference came from, for the report ("PLUGBOARD_TARGET" when a caller passes on
  /// the variable's value itself); default "the caller's settings".
  std::optional<std::string> policy_source;
};

/// One stage a candidate went through at boot, with its time.
struct StageReport {
  std::string stage;  ///< "found", "verified", "probed", "dependencies", "loaded", "initialized", "client", "devices"
  bool passed = false;  ///< whether the candidate passed it
  double ms = 0;  ///< how long it took
  std::string detail;  ///< what it found, on success
};

/// One candidate target of a boot (or of discover()): where it came from, how far it got, and why it
/// stopped.
struct CandidateReport {
  std::string name;  ///< the target's name ("cpu", "cuda13")
  std::string platform;  ///< "cpu", "cuda", "rocm", "tpu", "unknown"
  std::string source;  ///< where it was found
  /// "bundle" (the bundle given), "environment" (PLUGBOARD_PLUGIN_PATH, PJRT_NAMES_AND_LIBRARY_PATHS),
  /// "python" (site-packages), or empty (given directly)
  std::string origin;
  /// Why the target's precompiled programs will not load on this machine (compiled on another
  /// processor, or under other XLA_FLAGS): they compile again on first use. Empty when nothing says so.
  std::string precompiled_mismatch;
  std::filesystem::path path;  ///< the plugin's file
  /// "chosen", "failed", "usable" (passed, another was chosen or nothing was started), "not tried",
  /// "excluded" (by the policy)
  std::string verdict;
  std::optional<std::string> failed_stage;  ///< the stage it failed at (StageReport::stage)
  std::optional<Error> error;  ///< why it failed
  std::string excluded_because;  ///< the policy's reason, for an "excluded" verdict
  bool isolated = false;  ///< its load and create stages ran in the plugboard-isolate child first
  std::vector<StageReport> stages;  ///< the stages it went through, in order
};

/// Why a target was chosen: every candidate considered, and the policy that ordered them.
struct Report {
  std::string policy;  ///< how the candidates were ordered: "priority (accelerators before CPU)", "explicit target cuda13 ...", "preference ..."
  std::vector<CandidateReport> candidates;  ///< in the order considered
  std::optional<size_t> chosen;  ///< index into candidates
  std::vector<std::string> notes;  ///< what discovery looked at and skipped
  std::string text;  ///< a table for terminals and logs
};

/// Lists the candidates with what can be known without loading anything: each goes through found,
/// verified, probed and dependencies, and passes as "usable" or fails with its reason. Nothing is
/// dlopen'ed, no client is made: cheap enough for a status page. Errors: malformed settings (named),
/// an explicit bundle that cannot be read.
PLUGBOARD_API Expected<Report> discover(const SelectionSettings& settings = {}) noexcept;

class Client;

/// What boot() gives: the client of the chosen target (if one started) and the report of the choice.
struct Boot {
  Report report;  ///< every candidate's verdict; report.text for a log
  std::shared_ptr<const Client> client;  ///< null when no candidate started
  Status status;  ///< ok when a client started; else every candidate's reason
};

/// Chooses a target by the policy and starts it. A boot in which nothing starts is a Boot whose status
/// says why; only malformed settings and unreadable explicit bundles are errors.
PLUGBOARD_API Expected<Boot> boot(const SelectionSettings& settings = {}) noexcept;

/// Runs `task` on the library's compile threads, those Client::compile_async uses (as many as the
/// machine has cores, at least 2, started as work arrives), so that a process embedding plugboard
/// keeps one compile pool: a binding posts its own compile work (declaring callbacks, compiling,
/// inspecting the result) here instead of running threads of its own. `task` must not throw and
/// should not wait on anything a user controls. False when it could not be queued (no memory, no
/// thread at all); `task` did not run then.
PLUGBOARD_API bool post_compile_work(std::function<void()> task) noexcept;

/// Waits up to `limit` for what the library's delivery threads have to do (completions, ordered host
/// callbacks, and the last references to programs and buffers let go of there, whose release may
/// destroy a client) to finish, so that a process about to exit lets the plugin's objects go before
/// exit() tears the plugin's statics down. False if some is still running then. Not from a delivery
/// thread (an on_complete or to_host_async function, an ordered callback).
PLUGBOARD_API bool await_deliveries(std::chrono::milliseconds limit) noexcept;

// ---------------------------------------------------------------------------------------------
// Programs and compilation.

/// StableHLO as MLIR text or portable bytecode. Immutable; thread-safe.
class Program {
 public:
  /// `name` is what messages call it.
  PLUGBOARD_API static Expected<Program> from_bytes(std::string bytes, std::string name = "<inline>") noexcept;
  /// A regular file only (a FIFO or a device is refused without reading).
  PLUGBOARD_API static Expected<Program> from_file(const std::filesystem::path& path) noexcept;
  /// What messages call it (the file's path, or from_bytes()'s name).
  PLUGBOARD_API const std::string& name() const noexcept;
  /// True for MLIR bytecode (a portable artifact), false for MLIR text: told by content.
  PLUGBOARD_API bool is_bytecode() const noexcept;

  /// \cond INTERNAL
  struct Impl;
  const std::shared_ptr<const Impl>& impl() const { return impl_; }
  /// \endcond

 private:
  explicit Program(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/// How XLA splits one program over several devices (SPMD: each device runs the program on its part
/// of the arrays; XLA inserts the collectives between them). Each reads its own form of sharding
/// annotations in the program; which forms a plugin accepts depends on its XLA build (docs/nx.md:
/// "Many devices").
enum class Partitioner {
  kNone,  ///< one device
  kGspmd,  ///< GSPMD: `mhlo.sharding` attributes (and module attributes mhlo.num_partitions)
  kShardy,  ///< Shardy: the `sdy` dialect (`sdy.mesh`, `sdy.sharding` attributes)
};

/// How Client::compile() compiles a program.
struct CompileOptions {
  /// XLA options as "name=value" (typed by XLA's DebugOptions: see `plugboard run --xla-option`).
  std::vector<std::string> xla_options;
  /// Leave out the options plugboard adds for JAX's numerics (xla_cpu_enable_fast_min_max=false, ...).
  bool plugin_defaults = false;
  /// Compile without a device assignment, so that the executable may run on any addressable device
  /// (ExecuteOptions::device).
  bool portable = false;
  /// SPMD: XLA splits the program into num_partitions parts by its sharding annotations, which
  /// `partitioner` reads, one part per device; run it with Executable::execute_partitioned. The
  /// outputs' shardings are left to XLA's propagation where the program does not give them.
  int num_partitions = 1;
  Partitioner partitioner = Partitioner::kNone;  ///< which annotations split it (with num_partitions > 1)
  /// The devices (indices into Client::devices()) the partitions run on, partition p on devices[p];
  /// empty: the first num_partitions devices.
  std::vector<int> devices;
  /// Look for the executable in the booted bundle's precompiled programs and in the persistent
  /// compile cache before compiling, and store what is compiled there (the cache's folder and size
  /// limit, or off: PLUGBOARD_COMPILE_CACHE, PLUGBOARD_COMPILE_CACHE_DIR, PLUGBOARD_COMPILE_CACHE_MAX_MB).
  bool compile_cache = true;
};

/// Where a compiled program's executable came from.
enum class ExecutableSource {
  kCompiled,  ///< the plugin compiled it
  kCompileCache,  ///< loaded from the persistent compile cache
  kPrecompiled,  ///< loaded from the precompiled programs of the bundle the client was booted from
};

/// How an executable was obtained: Executable::compile_report().
struct CompileReport {
  ExecutableSource source = ExecutableSource::kCompiled;  ///< compiled, or loaded from where
  double ms = 0;  ///< compiling, or loading (reading and checking the entry included)
  std::string key;  ///< the compile-cache key (64 hex digits); empty when no cache was used
  std::filesystem::path entry;  ///< the entry loaded, or the one stored
  std::vector<std::string> notes;  ///< entries refused on the way (tampered, corrupt, another build's), ...
  PLUGBOARD_API std::string to_string() const;  ///< "compiled in 33.1 ms", "compile-cache hit (loaded in 1.2 ms)", ...
  PLUGBOARD_API const char* source_id() const;  ///< "compiled", "compile_cache", "precompiled"
};

/// A parameter's or a result's type: element type and dimensions.
struct ArrayType {
  DType dtype = DType::kInvalid;  ///< the element type
  std::vector<int64_t> dims;  ///< row-major dimensions; empty for rank 0
  std::string to_string() const { return shape_string(dtype, dims); }  ///< "f32[2,4]"
};

// ---------------------------------------------------------------------------------------------
// Host callbacks: what a running program calls back into (see plugboard/host_call.h for what a host
// function is given).

/// A receiver: binds custom-call target names to host functions for the executions it is passed to.
/// Thread-safe; its bindings are fixed once an execution has used it.
class HostCallbacks {
 public:
  /// A receiver with no binding yet.
  PLUGBOARD_API static Expected<HostCallbacks> create() noexcept;
  /// Blocking: the program waits for the function, which writes the results.
  PLUGBOARD_API Status add_blocking(std::string name, BlockingFunction fn) noexcept;
  /// Ordered: for calls without results; delivered one at a time, in program order, on a delivery
  /// thread, all before the execution's await() returns and before its on_complete runs.
  PLUGBOARD_API Status add_ordered(std::string name, OrderedFunction fn) noexcept;
  /// The bound names, blocking and ordered.
  PLUGBOARD_API std::vector<std::string> names() const noexcept;

  /// \cond INTERNAL
  struct Impl;
  const std::shared_ptr<Impl>& impl() const { return impl_; }
  /// \endcond

 private:
  explicit HostCallbacks(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// Buffers and executions.

/// What an adopted buffer's device may do to the caller's memory under it.
enum class HostMemory {
  kMutable,  ///< given up: an execution that takes the buffer by donation may write into it
  kImmutable,  ///< never changes (an Erlang binary): the buffer refuses donation
};

/// An array on a device. Move-only; keeps its client (and plugin) alive.
class Buffer {
 public:
  PLUGBOARD_API Buffer() noexcept;  ///< an invalid buffer (valid() false)
  PLUGBOARD_API Buffer(Buffer&&) noexcept;  ///< takes the array; `other` becomes invalid
  PLUGBOARD_API Buffer& operator=(Buffer&&) noexcept;  ///< releases this one's array, takes `other`'s
  PLUGBOARD_API ~Buffer();

  /// False for a default-constructed, moved-from or donated buffer.
  PLUGBOARD_API bool valid() const noexcept;
  PLUGBOARD_API DType dtype() const noexcept;  ///< the element type
  PLUGBOARD_API std::span<const int64_t> dims() const noexcept;  ///< row-major dimensions
  PLUGBOARD_API size_t byte_size() const noexcept;  ///< what to_host() writes
  PLUGBOARD_API int device() const noexcept;  ///< index into Client::devices()
  /// False for a view of immutable host memory, and for a view of device memory
  /// (Client::view_of_device_memory).
  PLUGBOARD_API bool donatable() const noexcept;
  /// The platform-dependent address of the buffer's memory on its device (on CPU, a host address),
  /// for handing the memory to another framework without a copy. The address is valid only while
  /// this buffer lives and is not donated: whoever uses it must keep the buffer alive meanwhile. The
  /// plugin may wait for the contents to be computed first. UNIMPLEMENTED, naming the plugin and
  /// PJRT_Buffer_UnsafePointer, when the plugin does not provide it.
  PLUGBOARD_API Expected<uintptr_t> device_pointer() const noexcept;

  /// Copies the contents into `dst` (exactly byte_size() bytes), waiting for them.
  PLUGBOARD_API Status to_host(std::span<std::byte> dst) const noexcept;
  /// The same into a new vector.
  PLUGBOARD_API Expected<std::vector<std::byte>> to_host() const noexcept;
  /// Starts the copy and returns; `done` runs on a delivery thread once `dst` (which must stay valid
  /// until then) holds the contents, or with the error.
  PLUGBOARD_API Status to_host_async(std::span<std::byte> dst, std::function<void(Status)> done) const noexcept;

  /// \cond INTERNAL
  struct Impl;
  Impl* impl() const { return impl_.get(); }
  explicit Buffer(std::unique_ptr<Impl> impl) noexcept;
  /// \endcond

 private:
  std::unique_ptr<Impl> impl_;
};

/// An execution that may still be running. Move-only. Destroying it never waits: an unfinished
/// execution keeps what it uses alive until the plugin is done, still delivers its ordered calls, and
/// still runs its on_complete.
class Execution {
 public:
  PLUGBOARD_API Execution(Execution&&) noexcept;  ///< takes the execution over
  PLUGBOARD_API Execution& operator=(Execution&&) noexcept;  ///< drops this one (never waiting), takes `other`
  PLUGBOARD_API ~Execution();

  /// The outputs, usable at once (reading one waits for it to be computed).
  PLUGBOARD_API std::vector<Buffer>& outputs() noexcept;
  /// Waits for the outputs and every ordered host call; the execution's error, else the first failed
  /// ordered callback's. Later calls return the same.
  PLUGBOARD_API Status await() noexcept;
  /// Calls `done` with what await() returns, once the outputs are ready and every ordered call has
  /// been delivered, on a delivery thread (never this thread, never a plugin's), whether the execution
  /// is running or long finished. One per execution. `done` must not block for long.
  PLUGBOARD_API Status on_complete(std::function<void(Status)> done) noexcept;
  /// True when await() would return at once: the plugin ran the program inside execute() (XLA's CPU
  /// client does that for small programs), or it finished since. Never waits. False for an execution
  /// with host callbacks until await() has returned (its ordered calls may still be on their way).
  PLUGBOARD_API bool finished() const noexcept;
  PLUGBOARD_API uint64_t blocking_calls() const noexcept;  ///< blocking host calls made (final once complete)
  PLUGBOARD_API uint64_t ordered_calls() const noexcept;  ///< ordered host calls made (final once complete)

  /// \cond INTERNAL
  struct Impl;
  explicit Execution(std::unique_ptr<Impl> impl) noexcept;
  /// \endcond

 private:
  std::unique_ptr<Impl> impl_;
};

/// How Executable::execute() runs.
struct ExecuteOptions {
  /// Index into Client::devices(). Another device than 0 needs a program compiled portable, and
  /// every argument on that device.
  int device = 0;
  /// Arguments given up to the execution (their Buffers become invalid); a view of immutable host
  /// memory is refused.
  std::vector<int> donate;
  /// The receiver of the program's host calls; required when the program makes any.
  std::optional<HostCallbacks> callbacks;
};

/// A compiled program. Thread-safe: any number of threads may execute it at once.
class Executable {
 public:
  /// The program's name (its module's, or the file's).
  PLUGBOARD_API const std::string& name() const noexcept;
  /// Unknown (empty, parameters_known() false) when the plugin cannot tell.
  PLUGBOARD_API bool parameters_known() const noexcept;
  PLUGBOARD_API std::vector<ArrayType> parameters() const noexcept;  ///< the arguments execute() takes, in order
  PLUGBOARD_API std::vector<ArrayType> results() const noexcept;  ///< the outputs it gives, in order
  /// Every custom-call target the compiled program calls (nullopt when the plugin cannot tell).
  PLUGBOARD_API std::optional<std::vector<std::string>> custom_call_targets() const noexcept;
  /// How this executable was obtained (compiled, or loaded from a cache or the bundle).
  PLUGBOARD_API const CompileReport& compile_report() const noexcept;
  /// Those of them that are plugboard host callbacks: what a receiver must bind.
  PLUGBOARD_API std::vector<std::string> host_callbacks_needed() const noexcept;
  /// NOT_FOUND naming each needed callback `receiver` does not bind (before the first run).
  PLUGBOARD_API Status check_receiver(const HostCallbacks& receiver) const noexcept;

  /// Starts an execution and returns once the plugin has queued it. Arguments must be valid buffers
  /// of this client, of the program's types (an INVALID_ARGUMENT names the one that is not).
  PLUGBOARD_API Expected<Execution> execute(std::span<Buffer* const> args, const ExecuteOptions& options = {}) const noexcept;

  /// The devices (indices into Client::devices()) the program was compiled for, partition by
  /// partition: one for a program compiled for one device, num_partitions for an SPMD program, none
  /// for a portable one (it runs where ExecuteOptions::device says).
  PLUGBOARD_API std::vector<int> devices() const noexcept;
  /// Starts an SPMD program (CompileOptions::num_partitions) on all its devices at once: args[k] are
  /// the arguments for devices()[k], each on that device (its part of each array, as the program's
  /// shardings split them). Returns one Execution per device, in that order, each with that
  /// device's outputs and its own completion. ExecuteOptions::donate holds for every device's list;
  /// `device` must be 0 and `callbacks` unset (host callbacks are not carried across devices).
  PLUGBOARD_API Expected<std::vector<Execution>> execute_partitioned(std::span<const std::vector<Buffer*>> args,
                                                                     const ExecuteOptions& options = {}) const noexcept;

  /// \cond INTERNAL
  struct Impl;
  const std::shared_ptr<const Impl>& impl() const { return impl_; }
  explicit Executable(std::shared_ptr<const Impl> impl) noexcept : impl_(std::move(impl)) {}
  /// \endcond

 private:
  std::shared_ptr<const Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// Clients.

/// A device's memory figures (PJRT_Device_MemoryStats), where the plugin reports them.
struct DeviceMemory {
  int64_t bytes_in_use = 0;  ///< allocated now
  std::optional<int64_t> peak_bytes_in_use;  ///< the most allocated at once
  std::optional<int64_t> bytes_limit;  ///< what the allocator may use
  std::optional<int64_t> num_allocs;  ///< allocations made
  std::optional<int64_t> largest_alloc_size;  ///< the largest one
};

/// One addressable device of a client.
struct Device {
  int index = 0;  ///< what ExecuteOptions::device and buffers name
  int id = 0;  ///< the plugin's global id
  int local_hardware_id = -1;  ///< the device's number on its host (the GPU's ordinal); -1 when unknown
  std::string kind;  ///< "cpu", "NVIDIA H200", ...
  std::string description;  ///< the plugin's description of it
  std::optional<DeviceMemory> memory;  ///< where the plugin reports it
};

/// A create option for a plugin's client (e.g. {"cpu_device_count", int64_t{4}}).
struct CreateOption {
  std::string name;  ///< the option's name, as the plugin reads it
  std::variant<std::string, int64_t, std::vector<int64_t>, float, bool> value;  ///< its typed value
};

/// A client's place in a multi-host job (PJRT_Client_Create's kv callbacks and create options).
/// `kv_store`, when set, is what the plugin's kv_get / kv_put / kv_try_get reach, from the plugin's
/// threads, for as long as the client lives (the client holds it); node_id / num_nodes are passed as
/// the create options of those names only when set (0 <= node_id < num_nodes).
struct Distribution {
  std::shared_ptr<KeyValueStore> kv_store;  ///< the job's store; null: none
  std::optional<int64_t> node_id;  ///< this node's number in the job
  std::optional<int64_t> num_nodes;  ///< the job's node count
};

/// A started plugin: its devices, transfers and compilation. Thread-safe.
class Client {
 public:
  /// Loads one plugin file and makes a client, without selection: the file is checked (a regular ELF
  /// shared object, bounds-checked) before dlopen, and never unloaded.
  PLUGBOARD_API static Expected<std::shared_ptr<const Client>> open(const std::filesystem::path& plugin,
                                                                    const std::vector<CreateOption>& options = {}) noexcept;
  /// The same as one node of a multi-host job. PJRT_Client_Create may wait on the store (for the other
  /// nodes' keys): call it where waiting is allowed, never where the store's answers must come from.
  PLUGBOARD_API static Expected<std::shared_ptr<const Client>> open(const std::filesystem::path& plugin,
                                                                    const std::vector<CreateOption>& options,
                                                                    const Distribution& distribution) noexcept;

  PLUGBOARD_API const std::string& platform() const noexcept;  ///< "cpu", "cuda"
  PLUGBOARD_API const std::string& platform_version() const noexcept;  ///< the plugin's platform version string
  PLUGBOARD_API std::filesystem::path plugin_path() const noexcept;  ///< the plugin file it was made from
  /// The addressable devices, with their memory figures read now.
  PLUGBOARD_API std::vector<Device> devices() const noexcept;

  /// Copies row-major `data` (exactly the bytes dtype and dims call for) to a device; `data` may be
  /// reused on return.
  PLUGBOARD_API Expected<Buffer> copy_to_device(std::span<const std::byte> data, DType dtype,
                                                std::span<const int64_t> dims, int device = 0) const noexcept;
  /// A buffer over the caller's memory, zero-copy where the platform allows it (CPU, 64-byte aligned);
  /// `owner` keeps the memory alive and is released once the plugin is done with it.
  PLUGBOARD_API Expected<Buffer> adopt(std::span<const std::byte> data, std::shared_ptr<const void> owner,
                                       HostMemory memory, DType dtype, std::span<const int64_t> dims,
                                       int device = 0) const noexcept;

  /// A buffer over device memory this library does not own, without a copy: `address` on device
  /// `device` (as Buffer::device_pointer or another framework gives it; on CPU, a host address) holds
  /// a row-major array of `dtype` and `dims`. Lifetime: the view does NOT own the memory and keeps
  /// nothing alive; the owner must keep the memory valid for as long as the view, or any output an
  /// execution made aliasing it, lives. `on_release`, when given, runs exactly once: once the plugin
  /// is done with the memory (possibly after the view is destroyed, on a plugin thread, when work that
  /// read it finishes; it must not block or throw), or before this returns an error. A view is never donatable. The plugin may refuse an address
  /// (XLA's CPU client refuses a misaligned one); UNIMPLEMENTED, naming the plugin and
  /// PJRT_Client_CreateViewOfDeviceBuffer, when the plugin does not provide it. A wrong address is
  /// undefined behaviour: nothing can check it.
  PLUGBOARD_API Expected<Buffer> view_of_device_memory(uintptr_t address, DType dtype, std::span<const int64_t> dims,
                                                       int device = 0, std::function<void()> on_release = {}) const noexcept;

  /// Registers a receiver's names as custom-call targets on this plugin: before compiling programs
  /// that call them. The first use runs the plugin's host-callback self-test.
  PLUGBOARD_API Status declare_callbacks(const HostCallbacks& callbacks) const noexcept;

  /// Registers plugboard's LAPACK kernels on this plugin (custom-call targets plugboard_lapack_ssyevd,
  /// _dsyevd: symmetric eigendecomposition; _sgesdd, _dgesdd: SVD; src/lapack/kernels.h says what
  /// they take and give): before compiling programs that call them. CPU plugins only (UNIMPLEMENTED
  /// elsewhere); LAPACK is the system's liblapack.so.3 (PLUGBOARD_LAPACK: another, unless a boot with
  /// use_environment false succeeded in this process: its report's notes name it), opened at the
  /// first call (NOT_FOUND without it). Later calls cost a lookup.
  PLUGBOARD_API Status declare_lapack() const noexcept;

  /// Compiles `program` (or loads it from the bundle's precompiled programs or the compile cache:
  /// CompileOptions::compile_cache), waiting for it. The error names the program and the plugin.
  PLUGBOARD_API Expected<Executable> compile(const Program& program, const CompileOptions& options = {}) const noexcept;
  /// The same on a compile thread: returns at once; `done` runs there with the outcome. An error
  /// here means nothing was started (and `done` never runs).
  PLUGBOARD_API Status compile_async(Program program, CompileOptions options,
                                     std::function<void(Expected<Executable>)> done) const noexcept;

  /// \cond INTERNAL
  struct Impl;
  const Impl& impl() const { return *impl_; }
  explicit Client(std::unique_ptr<Impl> impl) noexcept;
  PLUGBOARD_API ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  /// \endcond

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace plugboard::api
