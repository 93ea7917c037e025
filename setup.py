"""Packaging for bayesnotes: reads settings.ini (nbdev 2 style).

`pip install .` gives the lean library (numpy, scipy, matplotlib, autograd, scikit-learn);
`pip install .[dev]` adds the notebook, documentation and test stack.
"""
from configparser import ConfigParser
import setuptools

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']

requirements = cfg.get('requirements', '').split()
dev_requirements = cfg.get('dev_requirements', '').split()
arviz_requirements = cfg.get('arviz_requirements', '').split()   # optional: bayesnotes.diagnostics.to_arviz
licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License')}
lic = licenses[cfg['license']]
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable']

setuptools.setup(
    name=cfg['lib_name'],
    version=cfg['version'],
    description=cfg['description'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    author=cfg['author'],
    author_email=cfg['author_email'],
    license=lic[0],
    url=cfg['git_url'],
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'License :: ' + lic[1],
                 'Natural Language :: ' + cfg['language'].title(),
                 'Programming Language :: Python :: 3',
                 'Topic :: Scientific/Engineering :: Mathematics'],
    packages=setuptools.find_packages(include=['bayesnotes', 'bayesnotes.*']),
    include_package_data=True,
    package_data={'bayesnotes': ['data/*']},
    install_requires=requirements,
    extras_require={'dev': dev_requirements, 'arviz': arviz_requirements},
    python_requires='>=' + cfg['min_python'],
    zip_safe=False,
    entry_points={'nbdev': [f"{cfg['lib_name']}={cfg['lib_name']}._modidx:d"]},
)
