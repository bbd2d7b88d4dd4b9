"""The Skills extension (io.modelcontextprotocol/skills, SEP-2640). Nothing imports this wing until a server is
given skills.

  _frontmatter  a SKILL.md's YAML frontmatter, read as PyYAML reads it, in the subset skills are written in
"""
