// The machine-readable summary of a planned or finished conversion, as the CLI's --json and
// the page show it.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/run.h"
#include "formats/formats.h"

namespace leapconv {

// header, tensors (name, source, dtype, shape, offset, bytes, max error, note), totals and the
// byte breakdown.
nlohmann::json conversion_summary(const PlannedConversion& pc, const ConversionReport& rep);

}  // namespace leapconv
