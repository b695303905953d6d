// The one compiled copy of nlohmann::json's member functions, which json.h declares extern.
#include "machinery/json.h"

template class nlohmann::basic_json<>;
