// Wheel over ZipArchive: the archive's entries as members, the wheel's own limits checked before any
// member is read.
#include "fetch/wheel.h"

#include <sys/stat.h>

#include <algorithm>

#include "base/regular_file.h"
#include "base/sha256.h"
#include "fetch/progress.h"

namespace plugboard::fetch {

Expected<Wheel> Wheel::open(const std::filesystem::path& path) {
  // Opened here (O_NONBLOCK, regular files only), so a FIFO named like a wheel is refused, not waited on.
  auto fd = open_regular_file(path);
  if (!fd) return std::unexpected(std::move(fd).error().annotate("opening wheel " + path.string()));
  PB_ASSIGN_OR_RETURN(ZipArchive archive, ZipArchive::open(std::move(*fd), "wheel " + path.string()));
  std::vector<WheelMember> members;
  members.reserve(archive.entries().size());
  for (size_t i = 0; i < archive.entries().size(); ++i) {
    const ZipEntry& e = archive.entries()[i];
    const bool symlink = e.made_by_os == ZipArchive::kMadeByUnix && S_ISLNK(static_cast<mode_t>(e.external_attributes >> 16));
    members.push_back(WheelMember{e.name, e.size, i, e.compressed_size, symlink});
  }
  return Wheel(path, std::move(archive), std::move(members));
}

const WheelMember* Wheel::find(std::string_view name) const {
  for (const WheelMember& m : members_)
    if (m.name == name) return &m;
  return nullptr;
}

Status Wheel::check_member(const WheelMember& member) const {
  const std::string what = "member " + member.name + " of wheel " + path_.string();
  if (member.symlink)
    return make_error(Code::kFailedPrecondition, what + " is a symbolic link: refused (a wheel's files are files)");
  if (member.size > kMaxMemberBytes)
    return make_error(Code::kResourceExhausted, what + " declares " + std::to_string(member.size) +
                                                    " bytes, more than the limit of " + std::to_string(kMaxMemberBytes) +
                                                    ": refused before extraction");
  if (member.size > kInflationRatioFloor && member.size / std::max<uint64_t>(member.compressed_size, 1) > kMaxInflationRatio)
    return make_error(Code::kResourceExhausted,
                      what + " would inflate from " + std::to_string(member.compressed_size) + " to " +
                          std::to_string(member.size) + " bytes, more than " + std::to_string(kMaxInflationRatio) +
                          " times: refused before extraction (a zip bomb?)");
  return ok();
}

Status Wheel::read(const WheelMember& member, const Sink& sink, bool progress) const {
  PB_RETURN_IF_ERROR(check_member(member));
  if (member.index >= archive_.entries().size() || archive_.entries()[member.index].name != member.name)
    return invalid_argument("member " + member.name + " is not one of wheel " + path_.string() + "'s");
  Progress bar(progress, "extracting " + std::filesystem::path(member.name).filename().string(), member.size);
  uint64_t done = 0;
  // The archive delivers no byte past what the entry declares, checks the size and the CRC-32 at the
  // end, and names the wheel and the member in its errors.
  return archive_.read(archive_.entries()[member.index], [&](std::span<const std::byte> chunk) -> Status {
    PB_RETURN_IF_ERROR(sink(chunk));
    done += chunk.size();
    bar.update(done);
    return ok();
  });
}

Expected<ExtractedMember> Wheel::extract(const WheelMember& member, const std::filesystem::path& dir,
                                         bool progress) const {
  PB_RETURN_IF_ERROR(check_member(member));
  PB_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::create(dir));
  Sha256 hasher;
  uint64_t done = 0;
  PB_RETURN_IF_ERROR(read(member, [&](std::span<const std::byte> chunk) -> Status {
    hasher.update(chunk);
    done += chunk.size();
    return out.write_all(chunk);
  }, progress));
  return ExtractedMember{std::move(out), hasher.hex_digest(), done};
}

}  // namespace plugboard::fetch
