"""The C++ name scanner: names a source uses, names a (preprocessed) header declares."""

import textwrap

from cuda_agent.evaluator.builder.cxxscan import DeclarationScanner, used_names
from cuda_agent.evaluator.builder.light import blank_umbrellas, unit_level


def test_used_names_skip_members_comments_strings_and_includes() -> None:
    source = """
    #include <torch/extension.h>
    // torch::zeros in a comment
    /* at::ones in a block comment */
    torch::Tensor f(torch::Tensor x) {
        auto y = torch::empty_like(x);
        const char* s = "at::sigmoid";
        return y.add_(x.contiguous());
    }
    """
    names, qualifiers = used_names(source)
    assert {"torch", "Tensor", "f", "x", "y", "empty_like"} <= names
    assert not {"zeros", "ones", "sigmoid", "extension", "add_", "contiguous"} & names
    assert "torch" in qualifiers and "empty_like" not in qualifiers


def test_a_name_also_used_outside_a_qualifier_is_not_qualifier_only() -> None:
    names, qualifiers = used_names("int std = 1; auto v = std::min(std, 2);")
    assert "std" in names and "std" not in qualifiers
    _, qualifiers = used_names("auto v = std::min(1, 2);")
    assert "std" in qualifiers


def scan(text: str) -> dict[str, set[tuple[str, str]]]:
    scanner = DeclarationScanner()
    scanner.feed('# 1 "/inc/h.h" 1\n' + textwrap.dedent(text))
    return scanner.names


def test_declarations_at_namespace_scope_only() -> None:
    names = scan(
        """
        namespace at {
        struct __attribute__((visibility("default"))) Widget { int member; void method(); };
        enum Color { kRed, kGreen = 2 };
        enum class Mode { Fast };
        inline int helper(int param, const int* ptr = nullptr) { int local = param; return local; }
        constexpr auto kAlias = 3;
        using Shortcut = Widget;
        typedef void (*callback_t)(int value);
        template <typename T, int N = 4> T tmpl(T value);
        class Forward;
        using ::other::Imported;
        void Widget::method() {}
        }
        #define MACRO_X(a, b) a + helper(b)
        """
    )["/inc/h.h"]
    declared = {name for _, name in names}
    expected = {"Widget", "Color", "kRed", "kGreen", "Mode", "helper", "kAlias", "Shortcut"}
    assert expected | {"callback_t", "tmpl", "MACRO_X"} <= declared
    not_declared = {"member", "method", "Fast", "param", "ptr", "local", "value", "T", "N"}
    assert not (not_declared | {"Forward", "Imported"}) & declared
    assert ("at", "helper") in names and ("", "MACRO_X") in names


def test_macro_definitions_record_the_names_they_use_not_their_parameters() -> None:
    scanner = DeclarationScanner()
    scanner.feed('# 1 "/inc/m.h" 1\n#define CALL(fn, arg) fn(arg) + ::detail::helper(arg)\n')
    assert scanner.macros["CALL"] == {"detail", "helper"}


def test_line_markers_attribute_names_and_parents() -> None:
    scanner = DeclarationScanner()
    scanner.feed(
        '# 1 "/inc/a.h" 1\nint in_a();\n# 1 "/inc/b.h" 1\nint in_b();\n# 3 "/inc/a.h" 2\n'
        "int also_in_a();\n"
    )
    assert {n for _, n in scanner.names["/inc/a.h"]} == {"in_a", "also_in_a"}
    assert {n for _, n in scanner.names["/inc/b.h"]} == {"in_b"}
    assert scanner.parents["/inc/b.h"] == "/inc/a.h"
    assert scanner.order == ["/inc/a.h", "/inc/b.h"]


def test_umbrella_level_and_blanking_keep_line_numbers() -> None:
    body = '#line 1 "cuda_sources"\n#include <torch/extension.h>\n#include <vector>\nint x;\n'
    assert unit_level("#include <torch/types.h>\n", "int x;") == 1
    assert unit_level("#include <torch/types.h>\n", body) == 2
    assert unit_level("", "#include <vector>\n") == 0
    blanked = blank_umbrellas(body)
    assert blanked.count("\n") == body.count("\n")
    assert "torch/extension.h" not in blanked and "#include <vector>" in blanked
