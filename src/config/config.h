#pragma once
// The config component's public header: configuration as code (fleet YAML files).

#include "config/fleet_spec.h"
