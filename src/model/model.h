#pragma once
// The model component's public header (JSON mapping is separate: model/json.h).

#include "model/catalog.h"
#include "model/state_machine.h"
#include "model/telemetry.h"
#include "model/types.h"
