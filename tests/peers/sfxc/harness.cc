// Ours: the main of sfxc-mk5-harness, a correlator input node cut down to its reader. It opens
// an `mk5://` URL with SFXC's own Data_reader_factory (so Data_reader_mk5 connects and sends its
// 24-byte request exactly as SFXC does), reads frames through SFXC's own VDIF_reader, and says
// what SFXC made of them: frames, invalid ones, each VDIF thread's time line (a frame whose time
// is not its thread's previous plus one frame is out of place, as SFXC's input node counts
// `nr_missing`/`nr_past`). Every byte read is copied to --raw for byte-exact checks.
//
//   sfxc-mk5-harness mk5:///path/sock/VSN:0 --threads 0,1 --payload 8000 --sample-rate 16000000
//       --bits 2 --channels 1 [--raw FILE] [--frames N] [--seconds S] [--read-delay-us U] [--age]
//   sfxc-mk5-harness mk5:///path/sock/VSN:0 --format mark5b --tracks 32 --sample-rate 1000000
//       [--mjd MJD] [--raw FILE] [--frames N] [--seconds S]
//
// --format mark5b: SFXC's Mark5b_reader instead (mark5b_reader.cc): `--tracks` bit streams at
// `--sample-rate` each (SFXC's n_tracks and track bit rate), `--mjd` the day the data begin on
// (SFXC's reference date; today by default). It reads 8 frames a block (N_MK5B_BLOCKS_TO_READ)
// and marks the fill pattern in the data invalid: frames and invalid frames are counted from
// blocks and from the invalid bytes (10 000 a frame); its one "thread" line is the blocks' time
// line (a block whose time is not the previous one's plus 8 frames is out of place).
//
// --age: each valid frame's age when read (the clock less its VDIF time, µs), min/p50/p99/max
// in the report: from a backend sending in real time, the whole path's latency up to SFXC's
// reader (the minimum is the path's floor plus the sender's own offset from its clock).
//
// Prints one JSON object on stdout at the end. Exit 0 when it read at least one frame.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "data_reader_factory.h"
#include "mark5b_reader.h"
#include "vdif_reader.h"

extern int harness_sample_rate;
extern int harness_bits_per_sample;

namespace {

volatile sig_atomic_t timed_out = 0;
void on_alarm(int) { timed_out = 1; }

// A Data_reader that passes SFXC's reader through and keeps a copy of every byte read.
class Tee_reader : public Data_reader {
 public:
  Tee_reader(Data_reader *inner, FILE *out) : inner_(inner), out_(out) {}
  bool eof() { return inner_->eof(); }
  bool can_read() { return inner_->can_read(); }
  uint64_t bytes = 0;

 private:
  size_t do_get_bytes(size_t n, char *buf) {
    std::vector<char> scratch;
    if (buf == NULL) {  // a skip: read it anyway, to keep the copy whole
      scratch.resize(n);
      buf = scratch.data();
    }
    size_t got = inner_->get_bytes(n, buf);
    if (got > 0 && out_ != NULL) fwrite(buf, 1, got, out_);
    bytes += got;
    return got;
  }
  boost::shared_ptr<Data_reader> inner_;
  FILE *out_;
};

struct Thread_line {
  int thread = 0;
  uint64_t frames = 0, invalid = 0, gaps = 0, gap_frames = 0, backwards = 0;
  bool seen = false;
  Time last;
};

[[noreturn]] void usage(const char *why) {
  fprintf(stderr, "sfxc-mk5-harness: %s\n", why);
  exit(2);
}

std::vector<int> parse_list(const char *s) {
  std::vector<int> v;
  for (const char *p = s; *p;) {
    char *end;
    long x = strtol(p, &end, 10);
    if (end == p) usage("--threads: a comma-separated list of thread ids");
    v.push_back((int)x);
    p = (*end == ',') ? end + 1 : end;
  }
  return v;
}

int today_mjd() {
  time_t now = time(NULL);
  return (int)(now / 86400) + 40587;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) usage("no URL");
  std::string url = argv[1];
  std::vector<int> threads = {0};
  int payload = 0, channels = 1, mjd = today_mjd();
  long long max_frames = -1, read_delay_us = 0;
  unsigned seconds = 0;
  bool age = false, mark5b = false;
  int tracks = 32;
  const char *raw = NULL;
  for (int i = 2; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--age") {
      age = true;
      continue;
    }
    if (i + 1 >= argc) usage(("missing value for " + a).c_str());
    const char *v = argv[++i];
    if (a == "--threads") threads = parse_list(v);
    else if (a == "--payload") payload = atoi(v);
    else if (a == "--sample-rate") harness_sample_rate = atoi(v);
    else if (a == "--bits") harness_bits_per_sample = atoi(v);
    else if (a == "--channels") channels = atoi(v);
    else if (a == "--raw") raw = v;
    else if (a == "--frames") max_frames = atoll(v);
    else if (a == "--seconds") seconds = (unsigned)atoi(v);
    else if (a == "--read-delay-us") read_delay_us = atoll(v);
    else if (a == "--mjd") mjd = atoi(v);
    else if (a == "--format") mark5b = std::string(v) == "mark5b";
    else if (a == "--tracks") tracks = atoi(v);
    else usage(("unknown option " + a).c_str());
  }
  if (mark5b) payload = SIZE_MK5B_FRAME * SIZE_MK5B_WORD;
  if (payload <= 0 || harness_sample_rate <= 0 || harness_bits_per_sample <= 0 || channels <= 0)
    usage("--payload, --sample-rate, --bits and --channels must be positive");

  // A wall-clock bound: the alarm interrupts SFXC's blocking read(), which it takes as EOF.
  if (seconds > 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;  // no SA_RESTART: read() returns EINTR
    sigaction(SIGALRM, &sa, NULL);
    alarm(seconds);
  }

  FILE *out = NULL;
  if (raw != NULL && (out = fopen(raw, "wb")) == NULL) usage("cannot open --raw file");

  // As SFXC's input node opens its source.
  std::vector<std::string> sources(1, url);
  Data_reader *mk5 = Data_reader_factory::get_reader(sources);
  Tee_reader *tee = new Tee_reader(mk5, out);
  boost::shared_ptr<Data_reader> reader(tee);
  bool connected = !mk5->eof();

  Input_node_parameters param;
  param.n_tracks = mark5b ? tracks : 0;  // VDIF: one thread per channel, the thread ids listed
  param.frame_size = payload;
  // VDIF's reader takes Mb/s, Mark5B's b/s (a whole number of MHz).
  param.track_bit_rate = mark5b ? harness_sample_rate : harness_sample_rate / 1000000;
  param.offset = Time();
  for (int t : threads) {
    Input_node_parameters::Channel_parameters c;
    c.bits_per_sample = harness_bits_per_sample;
    c.tracks.push_back(t);
    param.channels.push_back(c);
  }
  Input_node_types::Data_memory_pool pool(4);
  VDIF_reader::Data_frame frame;
  frame.buffer = pool.allocate();
  Time ref;
  ref.set_time(mjd, 0);
  VDIF_reader vdif(reader, frame, ref);
  Mark5b_reader mk5b(reader, frame, ref);
  Input_data_format_reader &fmt = mark5b ? (Input_data_format_reader &)mk5b : (Input_data_format_reader &)vdif;
  fmt.set_parameters(param);

  // One frame's time: its samples over the sample rate (SFXC's own time_between_headers()
  // assumes one channel per thread). Mark5B: a block of N_MK5B_BLOCKS_TO_READ frames.
  double samples = 8.0 * payload / (harness_bits_per_sample * channels);
  Time step(samples / harness_sample_rate * 1e6);
  if (mark5b) {
    threads = {0};
    step = mk5b.time_between_headers();
  }
  const uint64_t per_block = mark5b ? N_MK5B_BLOCKS_TO_READ : 1;
  std::vector<Thread_line> lines(threads.size());
  for (size_t i = 0; i < threads.size(); i++) lines[i].thread = threads[i];

  uint64_t frames = 0, invalid = 0;
  std::vector<int32_t> ages;  // µs, valid frames (at most 16M kept)
  Time first, last;
  bool open = connected && fmt.open_input_stream(frame);
  const char *stopped_by = "eof";
  for (bool have = open; have; have = fmt.read_new_block(frame)) {
    int ch = mark5b ? 0 : frame.channel;
    if (ch < 0 || (size_t)ch >= lines.size()) ch = 0;
    Thread_line &l = lines[ch];
    // VDIF: one frame, invalid when marked so. Mark5B: a block, its frames whose data are the
    // fill pattern counted from the invalid bytes SFXC marked.
    uint64_t bad = !frame.invalid.empty();
    if (mark5b) {
      uint64_t invalid_bytes = 0;
      for (size_t i = 0; i < frame.invalid.size(); i++) invalid_bytes += frame.invalid[i].nr_invalid;
      bad = invalid_bytes / (SIZE_MK5B_FRAME * SIZE_MK5B_WORD);
    }
    Time t = frame.start_time;
    if (l.seen) {
      int64_t d = (t - l.last).get_clock_ticks() - step.get_clock_ticks();
      if (d < -2) {
        l.backwards++;
      } else if (d > 2) {
        l.gaps++;
        l.gap_frames += ((uint64_t)((t - l.last) / step + 0.5) - 1) * per_block;
      }
    }
    l.seen = true;
    l.last = t;
    l.frames += per_block;
    l.invalid += bad;
    if (age && !bad && ages.size() < (16u << 20)) {
      struct timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      Time wall;
      wall.set_time((int)(now.tv_sec / 86400) + 40587, (double)(now.tv_sec % 86400) + now.tv_nsec * 1e-9);
      ages.push_back((int32_t)((wall - t).get_clock_ticks() / (MAX_SAMPLE_RATE / 1000000)));
    }
    if (frames == 0) first = t;
    last = t;
    frames += per_block;
    invalid += bad;
    frame.invalid.clear();
    if (max_frames >= 0 && (long long)frames >= max_frames) {
      stopped_by = "frames";
      break;
    }
    if (read_delay_us > 0) usleep((useconds_t)read_delay_us);
  }
  if (timed_out) stopped_by = "seconds";
  if (out != NULL) fclose(out);

  // SFXC's own rendering of the times (yyyy y ddd d hh h mm m ss.sss s).
  std::ostringstream t0, t1;
  if (frames) t0 << first, t1 << last;
  printf("{\"connected\":%s,\"opened\":%s,\"stopped_by\":\"%s\",\"bytes\":%llu,\"frames\":%llu,"
         "\"invalid\":%llu,\"first_time\":\"%s\",\"last_time\":\"%s\",\"threads\":[",
         connected ? "true" : "false", open ? "true" : "false", stopped_by,
         (unsigned long long)tee->bytes, (unsigned long long)frames, (unsigned long long)invalid,
         t0.str().c_str(), t1.str().c_str());
  for (size_t i = 0; i < lines.size(); i++) {
    const Thread_line &l = lines[i];
    printf("%s{\"thread\":%d,\"frames\":%llu,\"invalid\":%llu,\"gaps\":%llu,\"gap_frames\":%llu,"
           "\"backwards\":%llu}",
           i ? "," : "", l.thread, (unsigned long long)l.frames, (unsigned long long)l.invalid,
           (unsigned long long)l.gaps, (unsigned long long)l.gap_frames,
           (unsigned long long)l.backwards);
  }
  printf("]");
  if (!ages.empty()) {
    std::sort(ages.begin(), ages.end());
    size_t n = ages.size();
    printf(",\"age_us\":{\"count\":%zu,\"min\":%d,\"p50\":%d,\"p99\":%d,\"max\":%d}", n, ages[0],
           ages[n / 2], ages[std::min(n - 1, n * 99 / 100)], ages[n - 1]);
  }
  printf("}\n");
  return frames > 0 ? 0 : 1;
}
