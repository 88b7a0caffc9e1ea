// Command gen writes gpu/vk's bindings from the Vulkan registry (vk.xml,
// Debian's libvulkan-dev installs it): the commands the backend calls,
// every type they reach, the structures it chains through pNext, and a
// layout test that holds each structure's size and field offsets against
// the C headers. Run it through scripts/gpu/gen-vk.sh; its output is
// committed, so building gguftool needs neither the registry nor cgo.
//
//	go run ./gpu/vk/internal/gen -registry /usr/share/vulkan/registry/vk.xml -out gpu/vk
package main

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// commands are the entry points the backend calls.
var commands = []string{
	"vkCreateInstance", "vkDestroyInstance", "vkEnumerateInstanceVersion",
	"vkEnumerateInstanceLayerProperties", "vkEnumerateInstanceExtensionProperties",
	"vkEnumeratePhysicalDevices", "vkGetPhysicalDeviceProperties2", "vkGetPhysicalDeviceFeatures2",
	"vkGetPhysicalDeviceMemoryProperties2", "vkGetPhysicalDeviceQueueFamilyProperties",
	"vkEnumerateDeviceExtensionProperties", "vkCreateDevice", "vkDestroyDevice", "vkGetDeviceProcAddr",
	"vkCreateDebugUtilsMessengerEXT", "vkDestroyDebugUtilsMessengerEXT",
	"vkGetDeviceQueue", "vkDeviceWaitIdle", "vkQueueSubmit", "vkQueueWaitIdle",
	"vkAllocateMemory", "vkFreeMemory", "vkMapMemory", "vkUnmapMemory",
	"vkFlushMappedMemoryRanges", "vkInvalidateMappedMemoryRanges",
	"vkCreateBuffer", "vkDestroyBuffer", "vkGetBufferMemoryRequirements", "vkBindBufferMemory",
	"vkCreateShaderModule", "vkDestroyShaderModule",
	"vkCreatePipelineCache", "vkGetPipelineCacheData", "vkDestroyPipelineCache",
	"vkCreateComputePipelines", "vkDestroyPipeline",
	"vkCreatePipelineLayout", "vkDestroyPipelineLayout",
	"vkCreateDescriptorSetLayout", "vkDestroyDescriptorSetLayout",
	"vkCreateDescriptorPool", "vkDestroyDescriptorPool", "vkResetDescriptorPool",
	"vkAllocateDescriptorSets", "vkUpdateDescriptorSets",
	"vkCreateCommandPool", "vkDestroyCommandPool", "vkResetCommandPool",
	"vkAllocateCommandBuffers", "vkFreeCommandBuffers",
	"vkBeginCommandBuffer", "vkEndCommandBuffer",
	"vkCmdBindPipeline", "vkCmdBindDescriptorSets", "vkCmdPushConstants", "vkCmdDispatch",
	"vkCmdPipelineBarrier", "vkCmdCopyBuffer", "vkCmdFillBuffer",
	"vkCreateFence", "vkDestroyFence", "vkWaitForFences", "vkResetFences", "vkGetFenceStatus",
	"vkCreateSemaphore", "vkDestroySemaphore", "vkWaitSemaphores", "vkGetSemaphoreCounterValue",
}

// chained are structures reached only through pNext, which no command
// names.
var chained = []string{
	"VkPhysicalDeviceVulkan11Features", "VkPhysicalDeviceVulkan12Features", "VkPhysicalDeviceVulkan13Features",
	"VkPhysicalDeviceVulkan11Properties", "VkPhysicalDeviceVulkan12Properties", "VkPhysicalDeviceVulkan13Properties",
	"VkPhysicalDeviceMemoryBudgetPropertiesEXT",
	"VkPhysicalDeviceShaderIntegerDotProductFeatures", "VkPhysicalDeviceShaderIntegerDotProductProperties",
	"VkTimelineSemaphoreSubmitInfo", "VkSemaphoreTypeCreateInfo", "VkSemaphoreWaitInfo",
	"VkDebugUtilsMessengerCallbackDataEXT", "VkValidationFeaturesEXT",
}

// extraEnums are enumerations no reached type names but the backend uses.
var extraEnums = []string{"VkObjectType", "VkVendorId", "VkDriverId"}

type registry struct {
	Types    []xType    `xml:"types>type"`
	Enums    []xEnums   `xml:"enums"`
	Commands []xCommand `xml:"commands>command"`
	Features []xFeature `xml:"feature"`
	Exts     []xFeature `xml:"extensions>extension"`
}

type xType struct {
	Category  string    `xml:"category,attr"`
	Name      string    `xml:"name,attr"`
	Alias     string    `xml:"alias,attr"`
	Requires  string    `xml:"requires,attr"`
	BitValues string    `xml:"bitvalues,attr"`
	Inner     string    `xml:",innerxml"`
	Members   []xMember `xml:"member"`
}

type xMember struct {
	API   string `xml:"api,attr"`
	Inner string `xml:",innerxml"`
}

type xEnums struct {
	Name   string  `xml:"name,attr"`
	Type   string  `xml:"type,attr"`
	Bitw   string  `xml:"bitwidth,attr"`
	Values []xEnum `xml:"enum"`
}

type xEnum struct {
	Name      string `xml:"name,attr"`
	Value     string `xml:"value,attr"`
	BitPos    string `xml:"bitpos,attr"`
	Alias     string `xml:"alias,attr"`
	Extends   string `xml:"extends,attr"`
	Offset    string `xml:"offset,attr"`
	ExtNumber string `xml:"extnumber,attr"`
	Dir       string `xml:"dir,attr"`
	Type      string `xml:"type,attr"`
}

type xCommand struct {
	Alias  string    `xml:"alias,attr"`
	Name   string    `xml:"name,attr"`
	Proto  xMember   `xml:"proto"`
	Params []xMember `xml:"param"`
}

type xFeature struct {
	Name    string `xml:"name,attr"`
	Number  string `xml:"number,attr"`
	Support string `xml:"supported,attr"`
	Require []struct {
		Enums []xEnum `xml:"enum"`
	} `xml:"require"`
}

// decl is a parsed member or parameter: C type, pointer depth, name,
// array length (a number or an API constant), const-ness.
type decl struct {
	Type, Name, Len string
	Ptr             int
}

var tagRe = regexp.MustCompile(`<(/?)(type|name|enum|comment)>`)

// parseDecl reads "const <type>T</type>* <name>n</name>[<enum>N</enum>]".
func parseDecl(inner string) decl {
	inner = regexp.MustCompile(`(?s)<comment>.*?</comment>`).ReplaceAllString(inner, "")
	var d decl
	field := func(tag string) string {
		m := regexp.MustCompile(`<` + tag + `>([^<]*)</` + tag + `>`).FindStringSubmatch(inner)
		if m == nil {
			return ""
		}
		return m[1]
	}
	d.Type, d.Name = field("type"), field("name")
	rest := inner[strings.Index(inner, "</name>")+len("</name>"):]
	if m := regexp.MustCompile(`\[(?:<enum>)?([A-Za-z0-9_]+)(?:</enum>)?\]`).FindStringSubmatch(rest); m != nil {
		d.Len = m[1]
	}
	before := inner[:strings.Index(inner, "<name>")]
	d.Ptr = strings.Count(tagRe.ReplaceAllString(before, ""), "*")
	return d
}

type gen struct {
	reg       registry
	types     map[string]*xType
	enumVals  map[string][]xEnum // enum type → values, extensions folded in
	enumKind  map[string]xEnums
	consts    map[string]string // API constants
	need      map[string]bool   // types to emit
	order     []string
	commands  map[string]*xCommand
	structSet []string
}

func main() {
	regPath := flag.String("registry", "/usr/share/vulkan/registry/vk.xml", "the Vulkan registry")
	out := flag.String("out", "gpu/vk", "the package directory to write")
	flag.Parse()
	raw, err := os.ReadFile(*regPath)
	if err != nil {
		fail(err)
	}
	g := &gen{types: map[string]*xType{}, enumVals: map[string][]xEnum{}, enumKind: map[string]xEnums{},
		consts: map[string]string{}, need: map[string]bool{}, commands: map[string]*xCommand{}}
	if err := xml.Unmarshal(raw, &g.reg); err != nil {
		fail(fmt.Errorf("%s: %w", *regPath, err))
	}
	version := regexp.MustCompile(`VK_HEADER_VERSION</name> (\d+)`).FindSubmatch(raw)
	if version == nil {
		fail(fmt.Errorf("%s: no VK_HEADER_VERSION", *regPath))
	}
	g.index()
	for _, c := range commands {
		g.needCommand(c)
	}
	for _, s := range chained {
		g.needType(s)
	}
	for _, e := range extraEnums {
		g.needType(e)
	}
	bind, layout := g.emit(string(version[1]))
	write(filepath.Join(*out, "vk.go"), bind)
	write(filepath.Join(*out, "layout_test.go"), layout)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}

func write(path string, src []byte) {
	formatted, err := format.Source(src)
	if err != nil {
		os.WriteFile(path+".broken", src, 0o644)
		fail(fmt.Errorf("%s: %w", path, err))
	}
	if err := os.WriteFile(path, formatted, 0o644); err != nil {
		fail(err)
	}
}

// index folds the registry into lookups: types by name, each enum's
// values with the extensions' additions.
func (g *gen) index() {
	for i := range g.reg.Types {
		t := &g.reg.Types[i]
		name := t.Name
		if name == "" {
			name = parseDecl(t.Inner).Name
		}
		if name != "" {
			if _, dup := g.types[name]; !dup {
				g.types[name] = t
			}
		}
	}
	for _, es := range g.reg.Enums {
		if es.Name == "API Constants" {
			for _, e := range es.Values {
				if e.Value != "" {
					g.consts[e.Name] = e.Value
				}
			}
			continue
		}
		g.enumKind[es.Name] = es
		g.enumVals[es.Name] = append(g.enumVals[es.Name], es.Values...)
	}
	add := func(extNumber string, es []xEnum) {
		for _, e := range es {
			if e.Extends == "" {
				continue
			}
			if e.Offset != "" && e.ExtNumber == "" {
				e.ExtNumber = extNumber
			}
			g.enumVals[e.Extends] = append(g.enumVals[e.Extends], e)
		}
	}
	for _, f := range g.reg.Features {
		for _, r := range f.Require {
			add("", r.Enums)
		}
	}
	for _, x := range g.reg.Exts {
		if x.Support == "disabled" {
			continue
		}
		for _, r := range x.Require {
			add(x.Number, r.Enums)
		}
	}
	for i := range g.reg.Commands {
		c := &g.reg.Commands[i]
		name := c.Name
		if name == "" {
			name = parseDecl(c.Proto.Inner).Name
		}
		g.commands[name] = c
	}
}

func (g *gen) needCommand(name string) {
	c, ok := g.commands[name]
	if !ok {
		fail(fmt.Errorf("no command %s", name))
	}
	if c.Alias != "" {
		fail(fmt.Errorf("%s is an alias of %s: list the command itself", name, c.Alias))
	}
	g.needType(parseDecl(c.Proto.Inner).Type)
	for _, p := range c.Params {
		if p.API == "vulkansc" {
			continue
		}
		g.needType(parseDecl(p.Inner).Type)
	}
}

var cScalars = map[string]string{
	"void": "", "char": "byte", "float": "float32", "double": "float64",
	"uint8_t": "uint8", "uint16_t": "uint16", "uint32_t": "uint32", "uint64_t": "uint64",
	"int8_t": "int8", "int16_t": "int16", "int32_t": "int32", "int64_t": "int64", "size_t": "uintptr", "int": "int32",
}

func (g *gen) needType(name string) {
	if _, scalar := cScalars[name]; scalar || g.need[name] {
		return
	}
	t, ok := g.types[name]
	if !ok {
		fail(fmt.Errorf("no type %s", name))
	}
	if t.Alias != "" {
		g.needType(t.Alias)
		g.need[name] = true
		g.order = append(g.order, name)
		return
	}
	g.need[name] = true
	switch t.Category {
	case "struct":
		for _, m := range t.Members {
			if m.API != "vulkansc" {
				g.needType(parseDecl(m.Inner).Type)
			}
		}
	case "union":
		fail(fmt.Errorf("%s is a union, which the generator does not lay out", name))
	case "bitmask":
		if bits := t.Requires + t.BitValues; bits != "" {
			g.needType(bits)
		}
		g.needType(parseDecl(t.Inner).Type)
	case "basetype":
		if inner := parseDecl(t.Inner).Type; inner != "" {
			g.needType(inner)
		}
	}
	g.order = append(g.order, name)
}

// goName strips the Vk prefix.
func goName(c string) string {
	if s, ok := cScalars[c]; ok {
		return s
	}
	return strings.TrimPrefix(c, "Vk")
}

// fieldName exports a C member name.
func fieldName(c string) string {
	if c == "type" {
		return "Type"
	}
	return strings.ToUpper(c[:1]) + c[1:]
}

// constName turns VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO into
// StructureTypeInstanceCreateInfo.
func constName(c string) string {
	parts := strings.Split(strings.TrimPrefix(c, "VK_"), "_")
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		switch p {
		case "KHR", "EXT", "NV", "AMD", "INTEL", "ARM", "QCOM", "GOOGLE", "MESA", "ID", "UUID", "LUID", "API":
			b.WriteString(p)
		default:
			b.WriteString(p[:1] + strings.ToLower(p[1:]))
		}
	}
	return b.String()
}

// goType is a member's Go type.
func (g *gen) goType(d decl) string {
	base := goName(d.Type)
	if t, ok := g.types[d.Type]; ok && t.Category == "funcpointer" {
		base = "uintptr"
	}
	if d.Ptr > 0 {
		if base == "" || base == "uintptr" && d.Type != "size_t" {
			base = "unsafe.Pointer"
			d.Ptr--
		}
		base = strings.Repeat("*", d.Ptr) + base
	}
	if d.Len != "" {
		n := d.Len
		if v, ok := g.consts[n]; ok {
			n = v
		}
		base = "[" + n + "]" + base
	}
	return base
}

func (g *gen) enumValue(e xEnum, bitmask bool) (string, bool) {
	switch {
	case e.Alias != "":
		return constName(e.Alias), true
	case e.BitPos != "":
		return "1 << " + e.BitPos, true
	case e.Offset != "":
		ext, _ := strconv.Atoi(e.ExtNumber)
		off, _ := strconv.Atoi(e.Offset)
		v := 1000000000 + (ext-1)*1000 + off
		if e.Dir == "-" {
			v = -v
		}
		return strconv.Itoa(v), true
	case e.Value != "":
		v := strings.TrimSuffix(strings.TrimSuffix(e.Value, "U"), "ULL")
		if v == "(~0U)" || v == "(~0ULL)" || v == "(~0" {
			return "", false
		}
		return v, true
	}
	return "", false
}

func (g *gen) emit(version string) (bind, layout []byte) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by gpu/vk/internal/gen from the Vulkan registry (header version %s); DO NOT EDIT.\n\n", version)
	b.WriteString("package vk\n\nimport (\n\"fmt\"\n\"unsafe\"\n\n\"github.com/ebitengine/purego\"\n)\n\n")
	fmt.Fprintf(&b, "// HeaderVersion is the registry's VK_HEADER_VERSION these bindings were made from.\nconst HeaderVersion = %s\n\n", version)
	sort.Strings(g.order)
	var structs []string
	for _, name := range g.order {
		t := g.types[name]
		switch {
		case t.Alias != "":
			fmt.Fprintf(&b, "type %s = %s\n\n", goName(name), goName(t.Alias))
		case t.Category == "handle":
			under := "uint64"
			if strings.Contains(t.Inner, "VK_DEFINE_HANDLE") {
				under = "uintptr"
			}
			fmt.Fprintf(&b, "// %s is a Vulkan handle.\ntype %s %s\n\n", name, goName(name), under)
		case t.Category == "basetype":
			inner := parseDecl(t.Inner).Type
			if inner == "" {
				fmt.Fprintf(&b, "type %s unsafe.Pointer\n\n", goName(name))
				continue
			}
			fmt.Fprintf(&b, "type %s %s\n\n", goName(name), goName(inner))
		case t.Category == "bitmask":
			fmt.Fprintf(&b, "type %s %s\n\n", goName(name), goName(parseDecl(t.Inner).Type))
		case t.Category == "enum":
			g.emitEnum(&b, name)
		case t.Category == "funcpointer":
			fmt.Fprintf(&b, "// %s is a C function pointer.\ntype %s = uintptr\n\n", name, goName(name))
		case t.Category == "struct":
			structs = append(structs, name)
			g.emitStruct(&b, name, t)
		}
	}
	g.emitCommands(&b)
	return b.Bytes(), g.emitLayout(structs, version)
}

func (g *gen) emitEnum(b *bytes.Buffer, name string) {
	kind := g.enumKind[name]
	under := "int32"
	if kind.Type == "bitmask" {
		under = "uint32"
		if kind.Bitw == "64" {
			under = "uint64"
		}
	}
	fmt.Fprintf(b, "type %s %s\n\n", goName(name), under)
	seen := map[string]bool{}
	var lines []string
	for _, e := range g.enumVals[name] {
		cn := constName(e.Name)
		if seen[cn] {
			continue
		}
		v, ok := g.enumValue(e, kind.Type == "bitmask")
		if !ok {
			continue
		}
		seen[cn] = true
		lines = append(lines, fmt.Sprintf("%s %s = %s", cn, goName(name), v))
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("const (\n" + strings.Join(lines, "\n") + "\n)\n\n")
	if !stringers[name] {
		return
	}
	fmt.Fprintf(b, "func (v %s) String() string {\nswitch v {\n", goName(name))
	printed := map[string]bool{}
	for _, e := range g.enumVals[name] {
		if e.Alias != "" || printed[e.Name] {
			continue
		}
		printed[e.Name] = true
		fmt.Fprintf(b, "case %s:\nreturn %q\n", constName(e.Name), e.Name)
	}
	fmt.Fprintf(b, "}\nreturn fmt.Sprintf(\"%s(%%d)\", int64(v))\n}\n\n", name)
}

// stringers are the enumerations that print their C names.
var stringers = map[string]bool{"VkResult": true, "VkPhysicalDeviceType": true, "VkDriverId": true}

func (g *gen) emitStruct(b *bytes.Buffer, name string, t *xType) {
	fmt.Fprintf(b, "// %s is the C structure of that name.\ntype %s struct {\n", name, goName(name))
	for _, m := range t.Members {
		if m.API == "vulkansc" {
			continue
		}
		d := parseDecl(m.Inner)
		fmt.Fprintf(b, "%s %s\n", fieldName(d.Name), g.goType(d))
	}
	b.WriteString("}\n\n")
}

// emitCommands writes a table of entry points and a method per command
// that calls it through purego. Pointer arguments go through escape so the
// objects they point at live on the heap, where a stack copy during the
// call cannot move them.
func (g *gen) emitCommands(b *bytes.Buffer) {
	b.WriteString("// The commands' slots in a Commands table.\nconst (\n")
	for i, c := range commands {
		fmt.Fprintf(b, "cmd%s = %d\n", strings.TrimPrefix(c, "vk"), i)
	}
	fmt.Fprintf(b, "numCommands = %d\n)\n\n", len(commands))
	b.WriteString("// commandNames are the entry points' C names, by slot.\nvar commandNames = [numCommands]string{\n")
	for _, c := range commands {
		fmt.Fprintf(b, "%q,\n", c)
	}
	b.WriteString("}\n\n")
	for _, name := range commands {
		c := g.commands[name]
		ret := parseDecl(c.Proto.Inner).Type
		var params, args []string
		for _, p := range c.Params {
			if p.API == "vulkansc" {
				continue
			}
			d := parseDecl(p.Inner)
			pn := d.Name
			if pn == "type" || pn == "range" {
				pn += "_"
			}
			params = append(params, pn+" "+g.goType(d))
			switch {
			case d.Ptr > 0:
				args = append(args, "escape(unsafe.Pointer("+pn+"))")
			case goName(d.Type) == "float32":
				fail(fmt.Errorf("%s takes a float, which SyscallN cannot pass", name))
			default:
				args = append(args, "uintptr("+pn+")")
			}
		}
		goRet := ""
		if ret != "void" {
			goRet = goName(ret)
		}
		short := strings.TrimPrefix(name, "vk")
		fmt.Fprintf(b, "// %s calls %s.\nfunc (c *Commands) %s(%s) %s {\n", short, name, short, strings.Join(params, ", "), goRet)
		call := fmt.Sprintf("purego.SyscallN(c.fn[cmd%s]%s)", short, prefixComma(args))
		if goRet == "" {
			fmt.Fprintf(b, "%s\n}\n\n", call)
		} else {
			fmt.Fprintf(b, "r, _, _ := %s\nreturn %s(r)\n}\n\n", call, goRet)
		}
	}
}

func prefixComma(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return ", " + strings.Join(args, ", ")
}

// emitLayout writes a test that compiles a C program printing every
// structure's size and field offsets from the headers and compares them
// with Go's.
func (g *gen) emitLayout(structs []string, version string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by gpu/vk/internal/gen from the Vulkan registry (header version %s); DO NOT EDIT.\n\n", version)
	b.WriteString("package vk\n\nimport \"unsafe\"\n\n")
	b.WriteString("// goLayouts are the Go structures' sizes and field offsets.\nvar goLayouts = []structLayout{\n")
	var c strings.Builder
	c.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include <vulkan/vulkan.h>\n#define S(T) printf(\"%s %zu\", #T, sizeof(T))\n#define F(T, f) printf(\" %zu\", offsetof(T, f))\nint main(void) {\n")
	for _, name := range structs {
		t := g.types[name]
		gn := goName(name)
		fmt.Fprintf(&b, "{%q, unsafe.Sizeof(%s{}), []uintptr{", name, gn)
		fmt.Fprintf(&c, "S(%s);", name)
		for _, m := range t.Members {
			if m.API == "vulkansc" {
				continue
			}
			d := parseDecl(m.Inner)
			fmt.Fprintf(&b, "unsafe.Offsetof(%s{}.%s), ", gn, fieldName(d.Name))
			fmt.Fprintf(&c, " F(%s, %s);", name, d.Name)
		}
		b.WriteString("}},\n")
		c.WriteString(" puts(\"\");\n")
	}
	c.WriteString("return 0;\n}\n")
	b.WriteString("}\n\n// cLayouts prints the same from the C headers.\nconst cLayouts = `" + c.String() + "`\n")
	return b.Bytes()
}
