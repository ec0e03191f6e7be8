// Quantities as a person reads them in a message.
#pragma once

#include <string>

namespace dstc {

// "0.4 s", "38 s", "6 min 5 s", "2 h 10 min", "3 days 4 h".
std::string human_duration(double seconds);
// "512 KiB", "3.2 GiB", "16 PiB" (binary units, three significant digits).
std::string human_bytes(double bytes);

}  // namespace dstc
