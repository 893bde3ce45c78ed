#pragma once
// The common component's public header: results, clock, secrets, small helpers.

#include "common/clock.h"
#include "common/crypto.h"
#include "common/paths.h"
#include "common/result.h"
#include "common/strings.h"
