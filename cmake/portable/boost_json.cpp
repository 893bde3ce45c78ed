// Boost.JSON compiled from its sources for the portable agent (cmake/portable-agent.cmake):
// Debian's libboost_json.a is not built for position-independent code.
#include <boost/json/src.hpp>
