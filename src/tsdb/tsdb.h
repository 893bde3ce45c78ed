#pragma once
// The tsdb component's public header: compressed in-memory series (chunk.h, series.h) and
// their registry (store.h).
// The write-ahead log, checkpoints and queries build on these.

#include "tsdb/chunk.h"
#include "tsdb/engine.h"
#include "tsdb/series.h"
#include "tsdb/store.h"
