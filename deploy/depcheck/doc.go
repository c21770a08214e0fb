// Package depcheck keeps the import graph pointing down. Its folders are
// layered (see Layers) above the shared vocabulary (see Vocabulary), and its
// test, run by `make lint`, fails when a package imports one of a higher
// layer, a vocabulary package imports anything but the standard library, an
// API shape is declared outside the vocabulary, a binary links a test
// helper, or the production build of cmd/seckill (deploy/Dockerfile's) links
// a tool: the load tool, dev mode's private services or the in-process
// broker.
package depcheck

// Layers are the repository's top folders, lowest first. A package may
// import its own folder's packages and those of lower layers, never a higher
// one's: the domains (seckill, then orders, which records seckill's
// reservations) know nothing of their faces (notify, gateway), and nothing
// but cmd/ imports the tools of deploy/.
var Layers = [][]string{
	{"lua", "migrations", "web"}, // embedded files
	{"seckill"},                  // the buying domain and its adapters
	{"orders"},                   // the order domain and its adapters
	{"notify"},                   // status events and the per-user hub
	{"gateway"},                  // the HTTP face
	{"deploy"},                   // local services, load tool, fleet, chaos, bench
	{"cmd"},                      // the binaries
}

// Vocabulary are the packages beneath every layer, whatever their folder,
// which any package may import: the platform's kinds of error and
// PublicError (seckill/apperr), and every object and socket frame of
// gateway/openapi.yaml (gateway/api). They import nothing but the standard
// library, so using the words pulls in no layer, driver or framework.
var Vocabulary = []string{"seckill/apperr", "gateway/api"}

// Messages are the JSON types outside Vocabulary, by package: what the
// fleet's processes, or a tool's output, say, which is not the API. Any
// other struct with JSON tags in a non-test file of seckill/, orders/,
// notify/ or gateway/ is an API shape declared out of its place (its place
// is gateway/api).
var Messages = map[string][]string{
	"seckill":             {"Reservation"}, // a reservation on the Kafka queue
	"seckill/waitroom":    {"wire"},        // a line's step on the room's Redis channel
	"orders/kafkaq":       {"DeadLetter"},  // a dead letter, as `seckill deadletters -json` lists it
	"notify":              {"wireEvent"},   // an order event on the Redis shard channels
	"seckill/fleethealth": {"Sample"},      // a process's health sample in the fleet's Redis hash
}

// Below are the packages of the gateway's folder that stand beneath its HTTP
// face: they import neither Fiber nor the packages named beside them, at
// any depth, so the buy and its steps can be read, and tested, without HTTP.
var Below = map[string][]string{
	// The buy's pipeline: the gateway calls it; it calls nothing of the
	// gateway or of its steps' implementation.
	"gateway/buy": {"gateway", "gateway/edge", "github.com/gofiber/fiber/v2"},
}

// TestOnly are the packages, besides the …test helpers, that only tests may
// import and no binary may link: the client generated from
// gateway/openapi.yaml, which the end-to-end tests drive the system with.
var TestOnly = []string{"gateway/apiclient"}
