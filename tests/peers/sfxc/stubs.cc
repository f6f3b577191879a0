// Ours, not SFXC's: the two Input_node_parameters methods SFXC's VDIF reader calls. Their
// definitions live in SFXC's control_parameters.cc, which pulls in the VEX parser, jsoncpp and
// (through the correlator's nodes) MPI; the harness only needs the numbers it was given.
#include "control_parameters.h"

// Set by the harness's main from its command line.
int harness_sample_rate = 0;
int harness_bits_per_sample = 2;

int Input_node_parameters::sample_rate() const { return harness_sample_rate; }

int Input_node_parameters::bits_per_sample() const {
  return channels.empty() ? harness_bits_per_sample : channels.front().bits_per_sample;
}
